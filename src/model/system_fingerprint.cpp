#include "model/system_fingerprint.h"

#include <fmt/format.h>

#include <fstream>
#include <vector>

#include "backend/cpu/ops/recurrent.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "backend/cpu/plan/path_method.h"
#include "core/cpu_features.h"
#include "gguf/ggml_types.h"

namespace pagoda::model {

namespace {

// FNV-1a over bytes, then SplitMix64's finaliser: a stable digest (not a security property).
struct Digest {
    uint64_t h = 1469598103934665603ull;
    void bytes(const void* data, size_t n) {
        const auto* p = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    }
    void text(const std::string& s) {
        const uint64_t n = s.size();
        bytes(&n, sizeof n);  // length first: no two lists of strings run together the same
        bytes(s.data(), s.size());
    }
    void number(uint64_t v) { bytes(&v, sizeof v); }
    uint64_t value() const {
        uint64_t z = h + 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

// The running executable's bytes, digested once per process (tens of MB: a few tens of ms). Where
// /proc is missing, 0: the fingerprint then tells builds apart by nothing but the other parts.
uint64_t build_digest() {
    static const uint64_t digest = [] {
        std::ifstream in("/proc/self/exe", std::ios::binary);
        if (!in) return uint64_t(0);
        Digest d;
        std::vector<char> buf(1 << 20);
        while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) d.bytes(buf.data(), size_t(in.gcount()));
        return d.value();
    }();
    return digest;
}

}  // namespace

FingerprintParts fingerprint_parts(const StepModelInfo& info) {
    FingerprintParts p;
    p.build = build_digest();
    p.model = info.model_key;
    p.backend = info.backend;
    p.threads = info.threads;
    p.isa = isa_name(active_isa());
    if (info.backend == "cpu") {
        // The plan's description, plus the method each weight type runs now: without a profile the
        // description says "default", while PAGODA_QUANT_METHOD / PAGODA_FLOAT_METHOD still choose.
        p.kernel_plan = backend::cpu::describe_kernel_plan();
        using gguf::GgmlType;
        for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                           GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                           GgmlType::Q5_K, GgmlType::Q6_K})
            p.kernel_plan += fmt::format("; {} {}", gguf::type_name(uint32_t(t)),
                                         backend::cpu::path_method_name(backend::cpu::kernel_choice(t, 1).method));
    }
    p.kv_dtype = kv::kv_dtype_name(info.kv_layout.dtype);
    if (info.backend == "cpu" && info.n_state_slots > 0 && backend::cpu::delta_rule_form() == backend::cpu::DeltaRuleForm::chunked) {
        p.kernel_plan += "; delta rule chunked";
        p.split_invariant = false;
    }
    return p;
}

bool backend_is_batch_invariant(const std::string& backend) { return backend == "cpu" || backend == "reference"; }

std::string system_fingerprint(const FingerprintParts& parts) {
    Digest d;
    d.number(parts.build);
    d.number(parts.model);
    d.text(parts.backend);
    d.number(uint64_t(parts.threads));
    d.text(parts.isa);
    d.text(parts.kernel_plan);
    d.text(parts.kv_dtype);
    return fmt::format("fp_{:016x}{}", d.value(), backend_is_batch_invariant(parts.backend) && parts.split_invariant ? "" : "_nd");
}

}  // namespace pagoda::model
