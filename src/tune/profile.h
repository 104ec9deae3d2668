// A tuning profile: what `pagoda tune` measured on one machine for one model, and what it chose.
// JSON (nlohmann), format version 1:
//   {"format": "pagoda-profile", "version": 1,
//    "machine": {"cpu_model", "vendor", "family", "model", "stepping", "isa_flags": [...], "cores"},
//    "model": {"path", "identity": 16 hex digits (model/model_identity.h)},
//    "kernel_plan": [{"type": "q4_0", "method": "int8_dot",
//                     "ranges": [{"max_tokens": 1, "kc", "mc", "nc"}, ..., {"kc", "mc", "nc"}],
//                     "amx_min_tokens": 32, "wide_min_tokens": 17}],
//                     (the last range has no max_tokens: every larger step; amx_min_tokens, optional
//                     and only for int8_dot on a packed type: the smallest step that takes AMX tiles,
//                     present where `pagoda tune` could measure them; wide_min_tokens, the same for
//                     the AVX-512 VNNI wide prefill kernel, at least 17)
//    "attention": "amx_bf16",  (optional: the attention method `pagoda tune` measured faster, simd or
//                     amx_bf16 (backend/cpu/plan/attention_method.h); absent where it was not measured —
//                     no AMX bf16 here, or a model with a sliding window or soft cap — and then simd)
//    "decode_kv_prefetch": true,  (optional: whether decode attention requests its next K and V rows
//                     ahead, as `pagoda tune` measured on whole decode steps (backend/cpu/attention/attention.h);
//                     absent where it was not measured, and then off)
//    "weight_prefetch": "l2",  (optional: where the packed decode kernels request their weight lines
//                     ahead, l1 or l2, as `pagoda tune` measured on whole decode steps
//                     (backend/cpu/matmul/weight_prefetch.h); absent where it was not measured, and then l2)
//    "threads", "kv_block_size",
//    "scheduler": {"max_batched_tokens", "max_seqs", "target_itl_ms", "modelled_p99_itl_ms",
//                  "modelled_output_tokens_per_s", "target_met"},
//    "measurements": {...}}   (raw timings, free-form, kept for the record)
// parse_profile() is strict: a missing or unknown key, a wrong type, an unknown type or method name,
// a non-positive tile or count, an unknown attention method, or another version throws
// pagoda::Error naming the key. The plan's
// meaning (one method per type, tiles per token range) is backend/cpu/plan/kernel_plan.h's.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/cpu/plan/kernel_plan.h"  // the plan's types; parsing needs only path_method.h's inline names
#include "tune/machine_identity.h"

namespace pagoda::tune {

constexpr int kProfileVersion = 1;

struct SchedulerKnobs {
    int64_t max_batched_tokens = 2048;
    int32_t max_seqs = 64;
    double target_itl_ms = 50;
    double modelled_p99_itl_ms = 0;
    double modelled_tokens_per_s = 0;
    bool target_met = false;
};

struct Profile {
    MachineIdentity machine;
    std::string model_path;
    uint64_t model_identity = 0;
    backend::cpu::KernelPlan plan;
    int threads = 1;
    int32_t kv_block_size = 16;
    SchedulerKnobs scheduler;
    nlohmann::json measurements = nlohmann::json::object();
};

nlohmann::json profile_to_json(const Profile& p);
// `where` prefixes every message (a file name, or "profile").
Profile parse_profile(const std::string& text, const std::string& where = "profile");
Profile read_profile_file(const std::string& path);
void write_profile_file(const Profile& p, const std::string& path);  // atomically (temp file + rename)

// A few lines for people: the machine, each type's method and tiles per range, threads, block size,
// the scheduler knobs with their modelled p99 inter-token latency and throughput.
std::string describe_profile(const Profile& p);

// Throws when the profile was measured on another machine, naming each field that differs.
void require_same_machine(const Profile& p, const MachineIdentity& here, const std::string& where);

}  // namespace pagoda::tune
