// The `system_fingerprint` of API responses: one short id for everything that decides which tokens
// a request gets besides the request itself, so a client can tell when the determinism promise's
// conditions changed (docs/api.md, "Guarantees"). It digests the build (the running executable's
// bytes, so two builds never share one), the model's identity (model_identity.h), the backend, its
// thread count, the instruction set and kernel plan it runs (every method and tile choice), and the
// KV cache's element type. Format: "fp_" and 16 hex digits, with "_nd" appended when the backend is
// not known to be batch-invariant (then the same request may give other tokens beside other work).
#pragma once
#include <cstdint>
#include <string>

#include "model/step_model.h"

namespace pagoda::model {

struct FingerprintParts {
    uint64_t build = 0;       // digest of the executable
    uint64_t model = 0;       // StepModelInfo::model_key
    std::string backend;      // "cpu", "reference", ...
    int threads = 0;
    std::string isa;          // the CPU path in use: scalar, avx2, avx512
    std::string kernel_plan;  // backend::cpu's description of its kernel choices (empty for others)
    std::string kv_dtype;     // f32, f16, bf16, q8
    // False where this model's outputs depend on how a prompt is split into steps: a model with
    // recurrent layers under PAGODA_DELTA_RULE=chunked (backend/cpu/ops/recurrent.h).
    bool split_invariant = true;
};

// The parts of the process and the model it serves (call after the model is open: the kernel plan
// is installed by then).
FingerprintParts fingerprint_parts(const StepModelInfo& info);
// Whether a backend's outputs for a token are bitwise the same whatever else is in its batch (the
// conformance suite tests this of every backend listed here).
bool backend_is_batch_invariant(const std::string& backend);
std::string system_fingerprint(const FingerprintParts& parts);

}  // namespace pagoda::model
