// Shared helpers of the AMX tests: run a packed matmul on the VNNI panels, on the emulated AMX tiles
// or on the AMX hardware, and restore the AMX switches afterwards.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/matmul/matmul.h"
#include "core/cpu_features.h"

namespace pagoda::backend::cpu::testing {

// What the hardware tests say where they cannot run.
inline constexpr const char* kNoAmxHere = "no AMX on this host (CPUID amx_int8 / OS permission)";

struct AmxGuard {
    bool enabled = amx_enabled();
    bool emulation = amx_emulation();
    CallPaths paths = call_paths();
    ~AmxGuard() {
        set_amx_enabled(enabled);
        set_amx_emulation(emulation);
        set_call_paths(paths);
    }
};

enum class AmxMode { vnni, emulated, hardware };
inline const char* amx_mode_name(AmxMode m) {
    return m == AmxMode::vnni ? "vnni" : m == AmxMode::emulated ? "emulated AMX" : "hardware AMX";
}

// Sets the switches for the mode (threshold 1: every step takes AMX) on the calling thread.
inline void select_amx_mode(AmxMode m) {
    set_amx_enabled(m != AmxMode::vnni);
    set_amx_emulation(m == AmxMode::emulated);
    CallPaths p = call_paths();
    p.amx_min_tokens = 1;
    set_call_paths(p);
}

// y = W x in the mode; fails the test when the AMX path was (not) taken as the mode says. Call
// under an AmxGuard.
inline std::vector<float> packed_product(const PackedWeight& w, const float* x, int64_t n, ThreadPool& pool, AmxMode m) {
    select_amx_mode(m);
    const uint64_t before = amx_dispatch_count();
    std::vector<float> y(size_t(n * w.source().rows), -1.f);
    matmul(w, x, n, y.data(), pool);
    EXPECT_EQ(amx_dispatch_count() - before, m == AmxMode::vnni ? 0u : 1u) << amx_mode_name(m) << " n " << n;
    return y;
}

}  // namespace pagoda::backend::cpu::testing
