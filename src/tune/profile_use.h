// Using a profile in a command (serve, run, bench, batch, bench-throughput): find it, check it was
// measured on this machine, install its kernel plan (before any weight is uploaded) and hand back
// the settings it chose, for the command to use where its own flags did not say otherwise.
// Where: --profile FILE; without the flag, the default location (default_profile_path) when a file
// is there; "none" uses no profile. An explicit profile from another machine is refused naming what
// differs; one at the default location is skipped with a warning saying the same (a home directory
// shared by several machines must not stop the others). A malformed profile is refused either way.
// A profile measured with another model still applies (its plan is per weight type), with a warning:
// its scheduler knobs were chosen for the other model's step times.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace pagoda::backend::cpu {
struct KernelPlan;
}

namespace pagoda::tune {

struct ProfileSettings {
    std::string path;  // the file used
    int threads = 0;
    int32_t kv_block_size = 16;
    int64_t max_batched_tokens = 0;
    int32_t max_seqs = 0;
};

// $XDG_CONFIG_HOME/pagoda/profile.json, else $HOME/.config/pagoda/profile.json; empty when neither
// variable is set.
std::string default_profile_path();

// `flag` is --profile's value: empty for the default location, "none", or a file. `model_path` is
// the model the command runs (for the identity check); empty skips that check.
std::optional<ProfileSettings> use_profile(const std::string& flag, const std::string& model_path);

// One model's own kernel plan (StepModelOptions::kernel_plan), for a model beside the one --profile
// serves (--draft-profile: a draft model's): the profile at `path` (a file; refused when missing,
// malformed or measured on another machine, as an explicit --profile), its plan validated for this
// machine; nothing is installed process-wide. A profile measured with another model than
// `model_path` is used with a warning (its plan is per weight type). `flag` names the option in errors.
std::shared_ptr<const backend::cpu::KernelPlan> model_kernel_plan(const std::string& path, const std::string& model_path,
                                                                  const std::string& flag);

}  // namespace pagoda::tune
