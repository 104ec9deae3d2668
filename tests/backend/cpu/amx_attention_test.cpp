// The amx_bf16 attention method (attention.h, amx_attention.h) on the emulated tiles (any AVX-512
// host) and on the AMX hardware (AMX hosts; said plainly where skipped):
//  - against a double-precision reference fed the operands the method rounds (Q, K, V to bf16):
//    what is left is P's rounding to bf16 (relative 2^-9 per weight: |error| <= 2^-9 max|v|, v in
//    [-1, 1]) and f32 arithmetic, so within 2.5e-3; and against the exact reference within 3e-2
//    (Q, K rounded move the scores by up to 2^-8 of sum |q k| scale);
//  - bitwise batch invariance: each token alone, in chunks of 7, reordered, 1 or 2 threads;
//  - the hardware tiles give the emulation's bits;
//  - what it does not take (q8 or f32 cache, sliding window, soft cap) takes the simd walk, bit for bit;
//  - PAGODA_ATTENTION chooses the method, a bad value is refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/attention_test_util.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/half.h"

namespace pagoda::backend::cpu {
namespace {

using kv::KvDtype;
using namespace testing;

float bf16_rounded(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// The method and its trait for the test's lifetime; everything restored after.
struct AmxAttentionMode {
    IsaGuard isa;
    AmxGuard amx;
    std::optional<AttentionMethod> saved = installed_attention_method();
    explicit AmxAttentionMode(bool emulated) {
        set_isa(Isa::avx512);
        set_amx_enabled(true);
        set_amx_emulation(emulated);
        set_attention_method(AttentionMethod::amx_bf16);
    }
    ~AmxAttentionMode() { set_attention_method(saved); }
};

bool avx512_here() { return best_supported_isa() >= Isa::avx512; }
bool amx_bf16_hardware_here() { return avx512_here() && amx_enabled() && amx_bf16_hardware_available(); }
constexpr const char* kNoAvx512 = "the AMX attention method (and its emulation) needs the avx512 path; this host has none";
constexpr const char* kNoAmxBf16 = "no AMX-BF16 on this host (CPUID amx_bf16 / OS permission): hardware check skipped";

// The reference of a scenario whose Q, K and V are first rounded to bf16, as the method rounds them.
std::vector<double> rounded_reference(const Scenario& s) {
    Scenario r;
    r.layout = s.layout;
    r.n_heads = s.n_heads;
    r.token_seq = s.token_seq;
    r.token_pos = s.token_pos;
    r.q = s.q;
    for (auto& x : r.q) x = bf16_rounded(x);
    r.k = s.k;
    r.v = s.v;
    for (auto& seq : r.k)
        for (auto& x : seq) x = bf16_rounded(x);
    for (auto& seq : r.v)
        for (auto& x : seq) x = bf16_rounded(x);
    return reference(r);
}

// Runs the scenario under the method and checks that it took the AMX walk.
std::vector<float> run_amx(const Scenario& s, ThreadPool& threads) {
    const uint64_t before = amx_attention_dispatch_count();
    std::vector<float> out = run_kernel(s, threads);
    EXPECT_EQ(amx_attention_dispatch_count() - before, 1u);
    return out;
}

void expect_matches_references(bool emulated) {
    AmxAttentionMode mode(emulated);
    ThreadPool threads(2);
    const int32_t head_dims[] = {64, 128, 20, 3, 96, 80};
    int config = 0;
    for (int32_t bs : {1, 16, 256}) {
        for (int32_t group : {1, 3, 8}) {
            for (KvDtype dtype : {KvDtype::f16, KvDtype::bf16}) {
                const kv::KvLayout L = one_layer(group == 8 ? 1 : 2, head_dims[config % 6], bs, dtype);
                std::vector<int32_t> lens = {45 + config, 100 + 5 * config, 230 + 11 * config};
                Scenario s = make_scenario(L, group, lens, prefill_queries(lens, config), uint32_t(900 + config),
                                           config % 2 == 0 ? 3.0f : 1.0f);
                const std::vector<float> got = run_amx(s, threads);
                const std::string what = "block " + std::to_string(bs) + " group " + std::to_string(group) + " head_dim " +
                                         std::to_string(L.head_dim) + " " + kv::kv_dtype_name(dtype) +
                                         (emulated ? " emulated" : " hardware");
                EXPECT_LE(max_abs_diff(got, rounded_reference(s)), 2.5e-3) << what;
                EXPECT_LE(max_abs_diff(got, reference(s)), 3e-2) << what;
                ++config;
            }
        }
    }
}

TEST(AmxAttention, EmulatedMatchesTheReferences) {
    if (!avx512_here()) GTEST_SKIP() << kNoAvx512;
    expect_matches_references(true);
}

TEST(AmxAttention, HardwareMatchesTheReferences) {
    if (!amx_bf16_hardware_here()) GTEST_SKIP() << kNoAmxBf16;
    expect_matches_references(false);
}

// A long context with a peaky softmax (the running max jumps between key steps).
TEST(AmxAttention, LongContextWithPeakySoftmax) {
    if (!avx512_here()) GTEST_SKIP() << kNoAvx512;
    AmxAttentionMode mode(!amx_bf16_hardware_here());
    ThreadPool threads(2);
    const kv::KvLayout L = one_layer(2, 64, 16, KvDtype::f16);
    std::vector<int32_t> lens = {1500};
    std::vector<std::pair<int32_t, int32_t>> q;
    for (int32_t p = 1400; p < 1500; p += 9) q.push_back({0, p});
    q.push_back({0, 31});
    q.push_back({0, 32});
    Scenario s = make_scenario(L, 4, lens, q, 77, 12.0f);
    const std::vector<float> got = run_amx(s, threads);
    EXPECT_LE(max_abs_diff(got, rounded_reference(s)), 2.5e-3);
}

// Every token of a two-sequence prefill batch gets the same bits alone, in chunks of 7, reordered,
// and on 1 thread.
void expect_batch_invariant(bool emulated) {
    AmxAttentionMode mode(emulated);
    struct Shape {
        int32_t head_dim, group, block_size;
        KvDtype dtype;
    };
    for (Shape shape : {Shape{64, 8, 16, KvDtype::f16}, Shape{20, 3, 1, KvDtype::bf16}, Shape{128, 2, 256, KvDtype::bf16},
                        Shape{96, 1, 16, KvDtype::f16}}) {
        const kv::KvLayout L = one_layer(2, shape.head_dim, shape.block_size, shape.dtype);
        Scenario full = two_sequence_prefill(L, shape.group);
        const uint64_t before = amx_attention_dispatch_count();
        expect_batch_invariant_bits(full, "head_dim " + std::to_string(L.head_dim) + " group " + std::to_string(shape.group));
        EXPECT_GT(amx_attention_dispatch_count(), before);
    }
}

TEST(AmxAttention, EmulatedBatchInvariantBitwise) {
    if (!avx512_here()) GTEST_SKIP() << kNoAvx512;
    expect_batch_invariant(true);
}

TEST(AmxAttention, HardwareBatchInvariantBitwise) {
    if (!amx_bf16_hardware_here()) GTEST_SKIP() << kNoAmxBf16;
    expect_batch_invariant(false);
}

// The instructions give the emulation's bits (prefill and decode shapes).
TEST(AmxAttention, HardwareGivesTheEmulationsBits) {
    if (!amx_bf16_hardware_here()) GTEST_SKIP() << kNoAmxBf16;
    ThreadPool threads(2);
    for (int32_t d : {64, 128, 20}) {
        const kv::KvLayout L = one_layer(2, d, 16, KvDtype::f16);
        std::vector<int32_t> lens = {45, 180, 333};
        Scenario s = make_scenario(L, 4, lens, prefill_queries(lens, d), 5, 3.0f);
        std::vector<float> emulated, hardware;
        {
            AmxAttentionMode mode(true);
            emulated = run_amx(s, threads);
        }
        {
            AmxAttentionMode mode(false);
            hardware = run_amx(s, threads);
        }
        EXPECT_EQ(std::memcmp(emulated.data(), hardware.data(), emulated.size() * sizeof(float)), 0) << "head_dim " << d;
    }
}

// The decode form's requests of the K and V rows a tile ahead (attention.h: decode_kv_prefetch)
// change no bit: decode tokens of sequences at contexts within one tile, across tiles and block
// edges, 4 and 8 query heads per KV head, on the emulated tiles and, where it runs, the hardware.
TEST(AmxAttention, DecodeKvPrefetchChangesNoBit) {
    if (!avx512_here()) GTEST_SKIP() << kNoAvx512;
    struct PrefetchGuard {
        bool saved = decode_kv_prefetch();
        ~PrefetchGuard() { set_decode_kv_prefetch(saved); }
    } prefetch_guard;
    ThreadPool threads(2);
    for (bool emulated : {true, false}) {
        if (!emulated && !amx_bf16_hardware_here()) continue;
        AmxAttentionMode mode(emulated);
        for (int32_t group : {4, 8}) {
            const kv::KvLayout L = one_layer(2, 64, 16, KvDtype::f16);
            const std::vector<int32_t> lens = {1, 33, 64, 65, 129, 200, 333};
            std::vector<std::pair<int32_t, int32_t>> decode;
            for (size_t i = 0; i < lens.size(); ++i) decode.push_back({int32_t(i), lens[i] - 1});
            Scenario s = make_scenario(L, group, lens, decode, 13 + uint32_t(group), 3.0f);
            set_decode_kv_prefetch(false);
            const uint64_t before = amx_attention_dispatch_count();
            const std::vector<float> off = run_amx(s, threads);
            set_decode_kv_prefetch(true);
            const std::vector<float> on = run_amx(s, threads);
            EXPECT_GT(amx_attention_dispatch_count(), before + 1);
            ASSERT_EQ(on.size(), off.size());
            EXPECT_EQ(std::memcmp(on.data(), off.data(), on.size() * sizeof(float)), 0)
                << (emulated ? "emulated" : "hardware") << " group " << group;
        }
    }
}

// A q8 or f32 cache, a sliding window or a soft cap take the simd walk: the bits simd gives, not counted.
TEST(AmxAttention, WhatItDoesNotTakeRunsTheSimdWalk) {
    if (!avx512_here()) GTEST_SKIP() << kNoAvx512;
    ThreadPool threads(2);
    struct Case {
        KvDtype dtype;
        int32_t window;
        float softcap;
    };
    for (Case c : {Case{KvDtype::q8, 0, 0.f}, Case{KvDtype::f32, 0, 0.f}, Case{KvDtype::f16, 40, 0.f}, Case{KvDtype::f16, 0, 30.f}}) {
        const kv::KvLayout L = one_layer(2, 64, 16, c.dtype);
        std::vector<int32_t> lens = {45, 100, 230};
        Scenario s = make_scenario(L, 2, lens, prefill_queries(lens, 1), 8);
        std::vector<float> simd, amx;
        {
            IsaGuard isa;
            set_isa(Isa::avx512);
            simd = run_kernel(s, threads, c.window, c.softcap);
        }
        {
            AmxAttentionMode mode(true);
            EXPECT_FALSE(amx_attention_applies(c.dtype, c.window, c.softcap));
            const uint64_t before = amx_attention_dispatch_count();
            amx = run_kernel(s, threads, c.window, c.softcap);
            EXPECT_EQ(amx_attention_dispatch_count(), before);
        }
        EXPECT_EQ(std::memcmp(simd.data(), amx.data(), simd.size() * sizeof(float)), 0) << kv::kv_dtype_name(c.dtype);
    }
}

// PAGODA_ATTENTION chooses while no method is installed; an installed one (a test's) holds.
TEST(AmxAttention, EnvironmentChoosesTheMethodAndRefusesOthers) {
    const std::optional<AttentionMethod> saved = installed_attention_method();
    const char* env = std::getenv("PAGODA_ATTENTION");
    const std::string saved_env = env ? env : "";
    set_attention_method(std::nullopt);
    ASSERT_EQ(setenv("PAGODA_ATTENTION", "amx_bf16", 1), 0);
    EXPECT_TRUE(attention_method_in_environment());
    EXPECT_EQ(attention_method(), AttentionMethod::amx_bf16);
    set_attention_method(AttentionMethod::simd);
    EXPECT_EQ(attention_method(), AttentionMethod::simd);
    set_attention_method(std::nullopt);
    ASSERT_EQ(setenv("PAGODA_ATTENTION", "flash", 1), 0);
    EXPECT_THROW(attention_method(), Error);
    ASSERT_EQ(unsetenv("PAGODA_ATTENTION"), 0);
    EXPECT_FALSE(attention_method_in_environment());
    EXPECT_EQ(attention_method(), AttentionMethod::simd);
    if (!saved_env.empty()) setenv("PAGODA_ATTENTION", saved_env.c_str(), 1);
    set_attention_method(saved);
}

}  // namespace
}  // namespace pagoda::backend::cpu
