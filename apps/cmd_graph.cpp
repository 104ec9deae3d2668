// `pagoda graph`: one step's graph as the architecture builds it and as it runs after the fusion
// pass — each op with its tensors' shapes and the backend kernel every matmul picks — so a reader
// sees what the model computes.
#include <cstdio>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/model_flags.h"
#include "model/open_step_model.h"
#include "model/model_file.h"

namespace pagoda::app {
namespace {

struct GraphOptions {
    std::string model;
    int64_t tokens = 1, logits = 0;
    int threads = 0;
    ModelFlags compute;
};

int run_graph(const GraphOptions& o) {
    const int64_t logit_rows = o.logits > 0 ? std::min(o.logits, o.tokens) : 1;
    auto model = model::open_step_model(model::open_model_file(o.model, o.compute.file_options(o.threads, false)), o.compute.options(o.threads, {.prefix_caching = false}, o.tokens, 0, o.tokens));
    const auto& info = model->info();
    std::printf("model: %s\nbackend: %s, a step of %lld tokens, %lld logit rows\n\n", info.config.describe().c_str(),
                info.backend.c_str(), (long long)o.tokens, (long long)logit_rows);
    std::printf("== as built: %s", model->describe_graph(o.tokens, logit_rows, false).c_str());
    if (!o.compute.no_fusion)
        std::printf("\n== as run (after fusion): %s", model->describe_graph(o.tokens, logit_rows, true).c_str());
    return 0;
}

CommandRegistration reg("graph", "Print one step's compute graph before and after fusion", [](CLI::App& sub) {
    auto o = std::make_shared<GraphOptions>();
    sub.add_option("-m,--model", o->model, model::kModelPathHelp)->required();
    sub.add_option("--tokens", o->tokens, "Tokens in the step (1: a decode step)")->check(in_range(1, 1 << 20))
        ->default_val(o->tokens);
    sub.add_option("--logits", o->logits, "Rows that want logits (default 1)")->check(in_range(0, 1 << 20));
    add_threads_option(sub, o->threads);
    o->compute.add_to(sub);
    return [o] { return run_graph(*o); };
});

}  // namespace
}  // namespace pagoda::app
