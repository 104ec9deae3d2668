#include "tune/profile_use.h"

#include <cstdlib>
#include <filesystem>
#include <fmt/ranges.h>

#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "model/model_file.h"
#include "model/model_identity.h"
#include "tune/profile.h"

namespace pagoda::tune {

std::string default_profile_path() {
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/pagoda/profile.json";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.config/pagoda/profile.json";
    return {};
}

std::optional<ProfileSettings> use_profile(const std::string& flag, const std::string& model_path) {
    if (flag == "none") return std::nullopt;
    const bool explicit_file = !flag.empty();
    const std::string path = explicit_file ? flag : default_profile_path();
    if (path.empty()) return std::nullopt;
    std::error_code ec;
    if (!explicit_file && !std::filesystem::exists(path, ec)) return std::nullopt;
    if (explicit_file && !std::filesystem::is_regular_file(path, ec))
        fail("--profile {}: no such file (make one with `pagoda tune -m MODEL -o {}`, or pass --profile none)", path, path);
    const Profile p = read_profile_file(path);
    const std::string where = fmt::format("profile {}", path);
    if (!explicit_file) {
        const auto diff = differences(p.machine, current_machine());
        if (!diff.empty()) {
            log_warn("{} (the default location) was measured on another machine ({}); not using it", where,
                     fmt::format("{}", fmt::join(diff, "; ")));
            return std::nullopt;
        }
    } else {
        require_same_machine(p, current_machine(), "--profile " + path);
    }
    if (!model_path.empty()) {
        const auto file = model::open_model_file(model_path);
        if (model::model_identity(*file) != p.model_identity)
            log_warn("{} was measured with another model ({}); its kernel plan applies by weight type, but its scheduler "
                     "knobs were chosen for that model's step times", where, p.model_path);
    }
    backend::cpu::set_kernel_plan(p.plan);
    log_info("using {}: {} threads, KV blocks of {}, --max-batched-tokens {}, --max-seqs {} (flags given on the command "
             "line win)", where, p.threads, p.kv_block_size, p.scheduler.max_batched_tokens, p.scheduler.max_seqs);
    return ProfileSettings{path, p.threads, p.kv_block_size, p.scheduler.max_batched_tokens, p.scheduler.max_seqs};
}

std::shared_ptr<const backend::cpu::KernelPlan> model_kernel_plan(const std::string& path, const std::string& model_path,
                                                                  const std::string& flag) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        fail("{} {}: no such file (make one with `pagoda tune -m MODEL -o {}`)", flag, path, path);
    const Profile p = read_profile_file(path);
    require_same_machine(p, current_machine(), flag + " " + path);
    backend::cpu::validate_kernel_plan(p.plan);
    if (!model_path.empty()) {
        const auto file = model::open_model_file(model_path);
        if (model::model_identity(*file) != p.model_identity)
            log_warn("{} {} was measured with another model ({}); its kernel plan applies by weight type", flag, path,
                     p.model_path);
    }
    log_info("{} {}: {} runs its own kernel plan", flag, path, model_path.empty() ? "the model" : model_path);
    return std::make_shared<const backend::cpu::KernelPlan>(p.plan);
}

}  // namespace pagoda::tune
