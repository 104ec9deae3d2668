// --profile FILE, shared by serve, run, bench, batch and bench-throughput: a `pagoda tune` profile
// for this machine (tune/profile_use.h says where it is looked for and when it is refused). The
// profile installs its kernel plan and supplies defaults for -t, --block-size, and where the command
// has them --max-batched-tokens and --max-seqs; any of those given on the command line wins. A
// profile is measured on the cpu backend (`pagoda tune`), so only what concerns the chosen backend
// applies: with another backend, the threads only where the CPU runs layers (-ngl N with vulkan),
// and the KV block size and scheduler knobs (chosen from the CPU's step times) not at all.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "apps/model_flags.h"
#include "core/log.h"
#include "tune/profile_use.h"

namespace pagoda::app {

struct ProfileFlags {
    std::string path;  // empty: the default location; "none": no profile
    CLI::App* app = nullptr;

    void add_to(CLI::App& sub) {
        app = &sub;
        sub.add_option("--profile", path,
                       "A `pagoda tune` profile: kernel paths, threads, KV block size, scheduler knobs measured on this "
                       "machine (default: $XDG_CONFIG_HOME/pagoda/profile.json or ~/.config/pagoda/profile.json when "
                       "present and measured on this machine; 'none': no profile). Flags given here win over it");
    }

    // Installs the profile (if any) and fills what the command line left unset. Null pointers: the
    // command has no such setting.
    void apply(const std::string& model, const ModelFlags& compute, int* threads, int32_t* block_size,
               int64_t* max_batched_tokens = nullptr, int32_t* max_seqs = nullptr) const {
        const auto s = tune::use_profile(path, model);
        if (!s) return;
        auto given = [&](const char* flag) {
            const CLI::Option* opt = app ? app->get_option_no_throw(flag) : nullptr;
            return opt && opt->count() > 0;
        };
        const bool cpu = compute.backend == "cpu";
        // -ngl N >= 0 with a device backend: layers past N and the head run on the cpu backend.
        const bool cpu_layers = cpu || (compute.backend == "vulkan" && compute.n_gpu_layers_option &&
                                        compute.n_gpu_layers_option->count() > 0 && compute.n_gpu_layers >= 0);
        if (!cpu)
            log_info("{}: measured on the cpu backend, so with --backend {} {}", s->path, compute.backend,
                     cpu_layers ? "only its threads apply (for the layers the CPU runs)"
                                : "none of its threads, KV block size and scheduler knobs apply");
        if (threads && cpu_layers && !given("--threads")) *threads = s->threads;
        if (!cpu) return;
        if (block_size && !given("--block-size")) *block_size = s->kv_block_size;
        if (max_batched_tokens && !given("--max-batched-tokens")) *max_batched_tokens = s->max_batched_tokens;
        if (max_seqs && !given("--max-seqs")) *max_seqs = s->max_seqs;
    }
};

}  // namespace pagoda::app
