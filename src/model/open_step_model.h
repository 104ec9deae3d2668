// The one way to get a runnable model: open_step_model(path, options) loads a GGUF file, builds its
// architecture's graph on the chosen backend, fuses it (unless told not to) and sizes the paged KV
// cache. serve, batch, bench, bench-throughput, run, perplexity and calibration all use it; nothing
// above src/model names a backend, a kernel or the model's internals.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/kv_options.h"
#include "model/step_model.h"

namespace pagoda::gguf {
class File;
}
namespace pagoda::backend::cpu {
struct KernelPlan;
}

namespace pagoda::model {

struct StepModelOptions {
    std::string backend = "cpu";  // "cpu" | "reference" (backend::backend_names())
    int threads = 0;              // 0: the backend's default
    KvOptions kv;
    int64_t tokens_wanted = 0;    // KV pool size when kv.memory is empty
    int64_t max_context = 0;      // 0: the model's trained context
    int64_t max_step_tokens = 512;  // activations are reserved for steps of this many tokens
    bool fusion = true;           // false: run the unfused graph (--no-fusion; PAGODA_FUSION=0 too)
    // Builds the LoRA twin of the step graph (lora_graph.h) so load_lora() works: steps with an
    // adapter run it, steps without run the plain fused graph. Off: load_lora() refuses.
    bool lora = false;
    // How adapters' numbers are stored for the steps (lora::LoraStorage; --lora-dtype).
    lora::LoraStorage lora_storage = lora::LoraStorage::exact;
    // With a device backend (vulkan): the first N layers run there, the rest and the output head on
    // the cpu backend (llama.cpp's -ngl; the token embedding stays on the cpu: its gathered rows cross
    // once a step). 0: all on the cpu; more than the model's layers, or -1: all on the device. Other
    // backends ignore it.
    int32_t n_gpu_layers = -1;
    // A model with recurrent layers: how many per-sequence states it keeps (StepModelInfo::
    // n_state_slots): the engine's max_seqs running sequences, then its prefix-cache snapshots
    // (EngineOptions::state_snapshots). 0: 16. Other models ignore it.
    int32_t state_slots = 0;
    // deepseek2's attention form (--mla): "absorbed" (a latent KV cache), "naive" (per-head K and V, the
    // absorbed form's twin) or empty: absorbed unless a device backend runs layers (it has no such
    // cache). Other models ignore it.
    std::string mla;
    // The CPU backend's own kernel plan for this model (backend/cpu/plan/kernel_plan.h; a `pagoda tune`
    // profile's, measured with it): its matmul methods and tiles, attention method and prefetches,
    // kept whatever set_kernel_plan does later, so a target and a draft model run their own plans in
    // one process. Null: the process's plan as installed when the model is opened. Used where the CPU
    // backend runs layers (--backend cpu, or the CPU's part of an -ngl split).
    std::shared_ptr<const backend::cpu::KernelPlan> kernel_plan;
};

// Throws pagoda::Error with a clear message for a bad file, an unknown backend or architecture, a
// missing or misshapen tensor, or a KV budget that cannot hold one block.
std::unique_ptr<StepModel> open_step_model(const std::string& path, const StepModelOptions& options);
std::unique_ptr<StepModel> open_step_model(std::shared_ptr<const gguf::File> file, const StepModelOptions& options);

// The backends this build has ("cpu", "reference", ...), for --backend.
std::vector<std::string> available_backends();

}  // namespace pagoda::model
