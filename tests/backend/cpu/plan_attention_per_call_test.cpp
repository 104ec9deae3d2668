// The attention method a CPU backend runs with is its own (kernel_plan.h PlanSettings::attention),
// handed to paged attention in the batch (PagedAttentionBatch::method); checked here at the kernel,
// where the walk taken and its bits are seen.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/attention_test_util.h"
#include "core/cpu_features.h"

namespace pagoda::backend::cpu {
namespace {

// The attention method a backend hands paged attention in the batch (its PlanSettings::attention)
// wins over the process's: on the emulated AMX bf16 tiles (any AVX-512 host), a batch naming
// amx_bf16 takes the AMX walk while the process's method is simd and gives that walk's bits, and a
// batch naming simd takes the simd walk while the process's is amx_bf16; a batch naming none
// follows the process.
TEST(PlanPerCall, TheBatchsAttentionMethodWinsOverTheProcesss) {
    if (best_supported_isa() < Isa::avx512) GTEST_SKIP() << "needs the avx512 path; this host has none";
    testing::IsaGuard isa;
    testing::AmxGuard amx_switches;
    const std::optional<AttentionMethod> saved = installed_attention_method();
    struct Restore {
        std::optional<AttentionMethod> m;
        ~Restore() { set_attention_method(m); }
    } restore{saved};
    set_isa(Isa::avx512);
    set_amx_enabled(true);
    set_amx_emulation(true);
    ThreadPool threads(2);
    const kv::KvLayout L = testing::one_layer(2, 64, 16, kv::KvDtype::f16);
    const std::vector<int32_t> lens = {70, 33};
    const testing::Scenario s = testing::make_scenario(L, 2, lens, {{0, 69}, {1, 32}, {0, 40}}, 31, 4.0f);
    auto run = [&](std::optional<AttentionMethod> method, bool amx_walk) {
        std::vector<AttentionSeq> views = s.seq_views();
        PagedAttentionBatch b;
        b.q = s.q.data();
        b.n_tokens = s.n_tokens();
        b.n_heads = s.n_heads;
        b.token_seq = s.token_seq.data();
        b.token_pos = s.token_pos.data();
        b.seqs = views.data();
        b.n_seqs = int32_t(views.size());
        b.scale = s.scale();
        b.method = method;
        std::vector<float> out(s.q.size(), std::nanf(""));
        const uint64_t before = amx_attention_dispatch_count();
        paged_attention(b, *s.pool, 0, out.data(), threads);
        EXPECT_EQ(amx_attention_dispatch_count() - before, amx_walk ? 1u : 0u);
        return out;
    };
    set_attention_method(AttentionMethod::simd);
    const std::vector<float> simd = run(std::nullopt, false);
    const std::vector<float> amx_own = run(AttentionMethod::amx_bf16, true);
    set_attention_method(AttentionMethod::amx_bf16);
    const std::vector<float> amx = run(std::nullopt, true);
    EXPECT_EQ(run(AttentionMethod::simd, false), simd);
    EXPECT_EQ(amx_own, amx);
    EXPECT_NE(simd, amx) << "the two methods must be told apart by their bits";
}

}  // namespace
}  // namespace pagoda::backend::cpu
