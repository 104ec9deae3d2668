// The compute flags shared by every command that runs a model: --backend, --no-fusion and llama.cpp's
// -ngl/--n-gpu-layers (with a device backend: the first N layers there, the rest on the cpu backend),
// turned with the command's own threads / KV choices into the options of model::open_step_model; and
// -fa/--flash-attn (main.cpp maps the short spellings), accepted so llama.cpp users' command lines
// run, with a one-line note saying it has no effect (as -ngl has none on the cpu and reference backends).
// The commands that take --mmproj add --mmproj-backend / --no-mmproj-offload: where the vision tower
// runs, the model's backend by default.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "apps/cli.h"
#include "core/error.h"
#include "model/model_file.h"
#include "model/open_step_model.h"

namespace pagoda::app {

struct ModelFlags {
    std::string backend = "cpu";
    bool no_fusion = false;
    int n_gpu_layers = 0;
    std::string flash_attn = "on";
    std::string quantize;  // --quantize TYPE: pagoda's PTQ at load
    std::string mla;       // --mla absorbed|naive (deepseek2's attention form); empty: absorbed where supported
    CLI::Option* n_gpu_layers_option = nullptr;
    CLI::Option* flash_attn_option = nullptr;
    std::string mmproj_backend;  // --mmproj-backend (empty: the model's backend)
    bool no_mmproj_offload = false;  // llama.cpp's --no-mmproj-offload: the tower on the cpu backend

    void add_to(CLI::App& sub) {
        sub.add_option("--backend", backend,
                       "Compute backend: cpu, reference (plain double-precision loops: the oracle, slow), or vulkan (a "
                       "Vulkan compute device, where the build has it: `pagoda devices` lists them)")
            ->check(CLI::IsMember(model::available_backends()));
        sub.add_flag("--no-fusion", no_fusion, "Run the unfused graph (also PAGODA_FUSION=0)");
        sub.add_option("--quantize", quantize,
                       "Quantise an F32/F16/BF16 model at load, in memory (a `pagoda quantize --type` name: q8_0, q4_0, "
                       "q4_k_m, ...; same weights as that command writes)");
        sub.add_option("--mla", mla,
                       "DeepSeek (deepseek2) multi-head latent attention: absorbed (the KV cache holds one latent row of "
                       "kv_lora_rank + rope values a token and layer, shared by all heads) or naive (each head's "
                       "decompressed K and V); default absorbed, naive on the vulkan backend; other models ignore it")
            ->check(CLI::IsMember({"absorbed", "naive"}));
        n_gpu_layers_option =
            sub.add_option("--n-gpu-layers", n_gpu_layers,
                           "-ngl: with --backend vulkan, the first N layers run on the device and the rest, with the output "
                           "head, on the cpu backend (N above the model's layers, or -1: all on the device, the default; "
                           "0: all on the cpu), as llama.cpp; the cpu and reference backends run every layer on the CPU, so "
                           "it has no effect there")
                ->check(in_range(-1, 1 << 20));
        flash_attn_option = sub.add_option("--flash-attn", flash_attn,
                                           "-fa [on|off|auto], as llama.cpp; attention always runs tiled (flash attention), "
                                           "so it has no effect")
                                ->expected(0, 1)
                                ->check(CLI::IsMember({"on", "off", "auto"}));
        sub.parse_complete_callback([this] { note_llama_flags(); });
    }

    // The vision tower's backend flags, for the commands that take --mmproj. The tower follows the
    // model's backend unless one of them says otherwise (a GPU short of memory for both).
    void add_mmproj_backend_to(CLI::App& sub) {
        sub.add_option("--mmproj-backend", mmproj_backend,
                       "Backend of the --mmproj vision tower: cpu, reference or vulkan (default: the model's --backend)")
            ->check(CLI::IsMember(model::available_backends()));
        sub.add_flag("--no-mmproj-offload", no_mmproj_offload,
                     "As llama.cpp: run the --mmproj vision tower on the cpu backend (--mmproj-backend cpu)");
    }
    // The backend the vision tower runs on. Throws pagoda::Error when the two flags disagree.
    std::string tower_backend() const {
        if (no_mmproj_offload && !mmproj_backend.empty() && mmproj_backend != "cpu")
            fail("--no-mmproj-offload runs the vision tower on the cpu backend, but --mmproj-backend says {}", mmproj_backend);
        if (no_mmproj_offload) return "cpu";
        return mmproj_backend.empty() ? backend : mmproj_backend;
    }

    // How to open -m: the model file or folder, quantised at load with --quantize.
    model::ModelFileOptions file_options(int threads, bool tokenizer = true) const {
        return {.quantize = quantize, .threads = threads, .tokenizer = tokenizer};
    }

    model::StepModelOptions options(int threads, const model::KvOptions& kv, int64_t tokens_wanted,
                                    int64_t max_context = 0, int64_t max_step_tokens = 512) const {
        model::StepModelOptions o;
        o.backend = backend;
        o.threads = threads;
        o.kv = kv;
        o.tokens_wanted = tokens_wanted;
        o.max_context = max_context;
        o.max_step_tokens = max_step_tokens;
        o.fusion = !no_fusion;
        o.mla = mla;
        o.n_gpu_layers = n_gpu_layers_option && n_gpu_layers_option->count() > 0 ? n_gpu_layers : -1;
        return o;
    }

private:
    // Says, once the command line is parsed, which llama.cpp flags were accepted without effect.
    void note_llama_flags() const {
        if (n_gpu_layers_option->count() > 0 && (backend == "cpu" || backend == "reference"))
            std::fprintf(stderr, "pagoda: note: --n-gpu-layers has no effect: the %s backend runs every layer on the CPU\n",
                         backend.c_str());
        if (flash_attn_option->count() > 0)
            std::fprintf(stderr, "pagoda: note: --flash-attn has no effect: attention always runs tiled (flash attention)\n");
    }
};

}  // namespace pagoda::app
