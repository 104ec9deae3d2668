// ALiBi in the tiled walk (PagedAttentionBatch::alibi_slopes) against its unfused twin, the
// per-sequence ALiBi kernel (alibi_attention.h), on every ISA and KV type: long sequences that cross
// many tiles, causal and non-causal (the encoder's: every token reads its sequence's last key),
// grouped heads, sliding windows, soft caps and sinks. Both sum in f32 in different orders, so they
// agree to float rounding, not bitwise.
#include <gtest/gtest.h>

#include "backend/alibi.h"
#include "backend/cpu/attention/alibi_attention.h"
#include "backend/cpu/attention_test_util.h"

namespace pagoda::backend::cpu::testing {
namespace {

TEST(AlibiTiled, MatchesTheUntiledKernel) {
    IsaGuard isa_guard;
    SimdAttention simd;
    ThreadPool threads(2);
    int cases = 0;
    for (Isa isa : available_isas()) {
        set_isa(isa);
        for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::q8})
            for (int trial = 0; trial < 4; ++trial) {
                const bool causal = trial % 2 == 1;
                const int32_t group = trial < 2 ? 1 : 4, window = trial == 3 ? 37 : 0;
                const float softcap = trial == 2 ? 20.0f : 0.0f;
                const kv::KvLayout layout{.n_layers = 1, .n_kv_heads = 2, .head_dim = 64, .block_size = 16, .dtype = dtype};
                const std::vector<int32_t> lens = {150, 67};
                std::vector<std::pair<int32_t, int32_t>> queries;
                for (int32_t s = 0; s < 2; ++s)
                    for (int32_t p = 0; p < lens[size_t(s)]; ++p) queries.push_back({s, p});
                Scenario sc = make_scenario(layout, group, lens, queries, uint32_t(60 + trial), 3.0f);
                std::vector<int32_t> own = sc.token_pos, last = sc.token_pos;
                for (size_t t = 0; t < last.size(); ++t) last[t] = lens[size_t(sc.token_seq[t])] - 1;
                std::vector<float> slopes, sinks;
                for (int32_t h = 0; h < sc.n_heads; ++h) {
                    slopes.push_back(float(alibi_slope(h, sc.n_heads, 8.0)));
                    sinks.push_back(0.25f * float(h % 5) - 0.5f);
                }
                std::vector<AttentionSeq> views = sc.seq_views();
                PagedAttentionBatch b;
                b.q = sc.q.data();
                b.n_tokens = sc.n_tokens();
                b.n_heads = sc.n_heads;
                b.token_seq = sc.token_seq.data();
                b.token_pos = causal ? own.data() : last.data();
                b.seqs = views.data();
                b.n_seqs = int32_t(views.size());
                b.scale = sc.scale();
                b.sliding_window = window;
                b.softcap = softcap;
                if (trial == 2) b.sinks = sinks.data();
                std::vector<int32_t> first;  // the window counts back from each token's own position
                if (window > 0) {
                    for (int32_t p : own) first.push_back(std::max(0, p - window + 1));
                    b.first_key = first.data();
                }
                std::vector<float> untiled(sc.q.size(), std::nanf("")), tiled(sc.q.size(), std::nanf(""));
                alibi_attention(b, own.data(), 8.0f, *sc.pool, 0, untiled.data(), threads);
                b.alibi_slopes = slopes.data();
                b.query_pos = own.data();
                paged_attention(b, *sc.pool, 0, tiled.data(), threads);
                double worst = 0;
                for (size_t i = 0; i < tiled.size(); ++i) worst = std::max(worst, double(std::abs(tiled[i] - untiled[i])));
                EXPECT_LT(worst, 2e-5) << isa_name(isa) << " " << kv::kv_dtype_name(dtype) << " trial " << trial
                                       << (causal ? " causal" : " non-causal");
                ++cases;
            }
    }
    EXPECT_GE(cases, 12);
}

}  // namespace
}  // namespace pagoda::backend::cpu::testing
