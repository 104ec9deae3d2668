// The compute flags shared by every command that runs a model: --backend and --no-fusion, turned
// with the command's own threads / KV choices into the options of model::open_step_model.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "model/open_step_model.h"

namespace pagoda::app {

struct ModelFlags {
    std::string backend = "cpu";
    bool no_fusion = false;

    void add_to(CLI::App& sub) {
        sub.add_option("--backend", backend,
                       "Compute backend: cpu, or reference (plain double-precision loops: the oracle, slow)")
            ->check(CLI::IsMember(model::available_backends()))
            ->default_val(backend);
        sub.add_flag("--no-fusion", no_fusion, "Run the unfused graph (also PAGODA_FUSION=0)");
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
        return o;
    }
};

}  // namespace pagoda::app
