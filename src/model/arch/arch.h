// Architecture builders: one file per architecture binds that architecture's tensors (by the names
// GGUF files in the wild use) to backend weights and writes its forward step as a Graph. The
// registry maps general.architecture to a builder; an architecture without one is a clear error.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_layout.h"
#include "model/config.h"
#include "model/graph.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

// A model made ready on a backend: its step graph (unfused) and the uploaded tensors it points to.
struct BuiltModel {
    // Weight bytes a builder assembled at load (deepseek2's regrouped rows) that uploads may keep
    // pointing to; declared first so they outlive the weights.
    std::vector<std::vector<uint8_t>> host_buffers;
    Graph graph;
    std::vector<std::shared_ptr<backend::Weight>> weights;
    std::vector<std::shared_ptr<backend::Vector>> vectors;
    std::vector<std::shared_ptr<backend::Rope>> ropes;
    std::vector<const backend::Weight*> matmul_weights;  // what a decode step streams
    kv::KvDtype kv_dtype = kv::KvDtype::f16;             // the natural cache type for these weights
    int32_t n_token_types = 0;  // rows of the token-type embedding (StepModelInfo::n_token_types)
    int64_t max_positions = 0;  // > 0: a learned position table's rows, the longest sequence it can run
    std::string max_positions_reason = "learned positions";  // what bounds them, for the --ctx error
    int32_t kv_layers = 0;  // > 0: the KV cache's layers when fewer layers attend (a hybrid); 0: every layer
    // > 0: the KV cache's heads and head size when they are not the config's (deepseek2's absorbed
    // latent cache: one head of rope + kv_lora_rank values whose V rows are its K rows, kv_v_is_k).
    int32_t kv_heads = 0, kv_head_dim = 0;
    bool kv_v_is_k = false;
};

using ArchBuilder = BuiltModel (*)(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);

// Throws pagoda::Error naming the architecture and the supported ones when there is no builder.
ArchBuilder find_arch_builder(const std::string& arch);
// The architectures of arch/arch_description.h's table that have a builder, in its order.
std::vector<std::string> supported_architectures();
// The architectures kBuilders names (for the test that each is described).
std::vector<std::string> builder_names();

BuiltModel build_llama(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen2(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen3vl(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen2moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen3moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_gemma2(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_gemma3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_gemma4(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_bert(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_nomic_bert(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_jina_bert_v2(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_gpt_oss(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_deepseek2(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_mistral3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_smollm3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_glm4(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_glm4moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen35(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen35moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_qwen3next(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_minimax_m2(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);
BuiltModel build_phi3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend);

}  // namespace pagoda::model
