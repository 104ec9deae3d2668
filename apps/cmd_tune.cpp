// `pagoda tune`: measures this machine with one model and writes the profile the other commands
// load with --profile (src/tune/tuner.h says what is measured and how each choice is made).
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/progress.h"
#include "apps/serving_probe.h"
#include "core/cpu_steal.h"
#include "core/error.h"
#include "model/model_file.h"
#include "tune/profile_use.h"
#include "tune/tuner.h"

namespace pagoda::app {
namespace {

// Above this share of stolen CPU time the timings tune compares are disturbed by more than the
// differences between the settings it chooses among (a few percent).
constexpr double kStealWarning = 0.05;

struct TuneCommandOptions {
    tune::TuneOptions tune;
    std::string output;
};

int run_tune(TuneCommandOptions& o) {
    if (!std::filesystem::is_regular_file(o.tune.model) && !std::filesystem::is_directory(o.tune.model))
        fail("the model '{}' is neither a GGUF file nor a Hugging Face model folder", o.tune.model);
    if (o.output.empty()) {
        o.output = tune::default_profile_path();
        if (o.output.empty()) fail("-o/--output: no default location (neither XDG_CONFIG_HOME nor HOME is set): give a file");
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(o.output).parent_path(), ec);
        if (ec) fail("-o/--output: cannot create {} ({})", std::filesystem::path(o.output).parent_path().string(), ec.message());
    }
    // The chosen scheduler knobs are checked by serving the workload with the engine.
    o.tune.serve_check = [&](const tune::ServingCheck& c) { return probe_serving(o.tune.model, c); };
    std::unique_ptr<Progress> bar;
    StealMeter steal;  // a host that takes CPU time from this guest skews every figure tune compares
    steal.begin();
    tune::Profile p = tune::tune_model(o.tune, [&](size_t done, size_t total, const std::string& what) {
        if (!bar) bar = std::make_unique<Progress>("measurements", total);
        bar->line(done, what);
    });
    if (bar) bar->finish();
    steal.end();
    p.measurements["steal_share"] = steal.known() ? nlohmann::json(steal.share()) : nlohmann::json(nullptr);
    tune::write_profile_file(p, o.output);
    std::printf("profile written to %s\n", o.output.c_str());
    std::printf("%s", tune::describe_profile(p).c_str());
    if (steal.known()) {
        std::printf("CPU time stolen by the hypervisor while measuring (/proc/stat steal): %.1f %%\n", 100 * steal.share());
        if (steal.share() > kStealWarning)
            std::fprintf(stderr,
                         "pagoda tune: warning: the host took %.0f %% of this machine's CPU time while tune measured; "
                         "the figures and the choices made from them may reflect its other guests: tune again when "
                         "the host is quieter\n",
                         100 * steal.share());
    }
    return 0;
}

CommandRegistration reg("tune", "Measure this machine with a model and write a profile (kernel paths, threads, scheduler knobs)",
                        [](CLI::App& sub) {
    auto o = std::make_shared<TuneCommandOptions>();
    sub.add_option("-m,--model", o->tune.model, model::kModelPathHelp)->required();
    sub.add_option("-o,--output", o->output,
                   "Profile to write (default: $XDG_CONFIG_HOME/pagoda/profile.json or ~/.config/pagoda/profile.json, "
                   "which the other commands read when present)");
    sub.add_option("--target-itl-ms", o->tune.target_itl_ms,
                   "p99 inter-token latency the scheduler knobs must keep (ms)")
        ->check(in_range(0.1, 1e6));
    sub.add_option("-t,--threads", o->tune.max_threads, "Most threads to try (0: one per physical core, as the other commands)")
        ->check(in_range(0, 1024));
    sub.add_flag("--quick", o->tune.quick, "Fewer points and repetitions (seconds on a tiny model; for tests)");
    sub.add_option("--prompt-len", o->tune.workload.prompt_tokens,
                   "Mean prompt tokens of the workload the knobs are chosen for")
        ->check(in_range(1.0, 1e7));
    sub.add_option("--output-len", o->tune.workload.output_tokens, "Mean output tokens of that workload")
        ->check(in_range(1.0, 1e7));
    sub.add_option("--concurrency", o->tune.workload.concurrency,
                   "Requests in flight in that workload (0: as many as --max-seqs admits)")
        ->check(in_range(0, 1 << 20));
    return [o] { return run_tune(*o); };
});

}  // namespace
}  // namespace pagoda::app
