// How `pagoda serve` builds its engine: the GGUF file -> model::open_step_model (the model's graph on
// a backend over its paged KV cache) -> engine::Engine, plus what the gateway reads from the file
// (the tokenizer, the chat template). The server itself never names a model or compute type.
#pragma once
#include <string>

#include "apps/lora_flags.h"
#include "kv/prefix_tier.h"
#include "model/kv_options.h"
#include "server/gateway.h"

namespace pagoda::app {

struct ServeModelOptions {
    std::string path;  // GGUF file or Hugging Face folder
    std::string quantize;  // --quantize TYPE at load (empty: as stored)
    int threads = 0;   // model threads; 0: physical cores
    int64_t max_context = 0;  // per sequence; 0: the model's trained context
    model::KvOptions kv;
    kv::PrefixTierOptions prefix_tier;  // the prefix cache's second tier (off by default)
    int32_t state_snapshots = 8;  // --state-snapshots: a recurrent model's prefix-cache state snapshots
    std::string backend = "cpu";
    bool fusion = true;
    std::string mmproj;       // --mmproj: the model's vision projector (images in chat requests; empty: none)
    std::string mmproj_backend;  // --mmproj-backend: the vision tower's backend (empty: `backend`)
    int64_t image_cache_mb = 256;  // --image-cache-mb: the encoded-image cache's bound (0: off)
    std::string draft_model;  // --draft-model: a GGUF of the same vocabulary (empty: none)
    std::string draft_profile;  // --draft-profile: the draft's own kernel plan (empty: the model's)
    std::vector<LoraSpec> loras;     // --lora: adapters served as models of their own
    bool allow_runtime_lora = false;  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter
    size_t max_loras = 0;             // adapters resident at once (0: no cap); idle ones evicted LRU
    lora::LoraStorage lora_storage = lora::LoraStorage::exact;  // --lora-dtype
    bool lora() const { return !loras.empty() || allow_runtime_lora; }
};

// A server::ModelLoader for these options: builds the Engine with `engine_options` (the gateway's
// scheduler settings and hooks) plus prefix caching from the KV options. Throws pagoda::Error.
server::LoadedModel load_serve_model(const ServeModelOptions& options, engine::EngineOptions engine_options);

}  // namespace pagoda::app
