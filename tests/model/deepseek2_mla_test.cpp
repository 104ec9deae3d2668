// deepseek2's absorbed multi-head latent attention (--mla absorbed: one latent KV row [k_pe, c] a token
// and layer, V rows = K rows) against its naive twin (each head's decompressed K and V): the logits of
// prefill and decode on the CPU and reference backends for V3's form (q bottleneck, experts, YaRN) and
// V2-Lite's (plain attn_q), from attn_kv_b and from attn_k_b / attn_v_b, F32 and Q8_0; greedy tokens;
// a prefix-cache hit against a miss; the cache's bytes per token (rope + kv_lora values a layer); the
// --mla error; and the KV figure for DeepSeek V3's and V2-Lite's real shapes (docs/benchmarks.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"
#include "fixtures.h"
#include "kv/kv_layout.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "model_compare.h"

namespace pagoda::model {
namespace {

using model_compare::prompt;

// V3's form, small: 4 heads of nope 16 + rope 8, v 16, kv rank 32, q rank 32, 3 layers (1 dense);
// lite: V2-Lite's plain attn_q, softmax routing, no YaRN.
RandomModelSpec mla_spec(bool lite, bool split) {
    RandomModelSpec s;
    s.arch = "deepseek2";
    s.n_layers = 3; s.dim = 64; s.n_heads = 4; s.head_dim = 24; s.ffn_dim = 96; s.vocab_size = 300;
    s.mla_rope_dims = 8; s.v_head_dim = 16; s.kv_lora_rank = 32; s.q_lora_rank = lite ? 0 : 32;
    s.n_experts = 8; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.n_shared_experts = 1; s.leading_dense = 1;
    s.expert_gating = lite ? 1 : 2; s.expert_groups = lite ? 0 : 4; s.expert_groups_used = lite ? 0 : 2;
    s.expert_weights_scale = lite ? 1.0f : 2.5f; s.expert_weights_norm = !lite; s.yarn = !lite;
    s.mla_split = split; s.seed = 123;
    return s;
}

std::unique_ptr<StepModel> open_form(const std::string& path, const std::string& backend, const std::string& mla,
                                     int32_t block_size = 4) {
    return open_step_model(path, {.backend = backend, .threads = 2, .kv = {.block_size = block_size, .dtype = kv::KvDtype::f32},
                                  .tokens_wanted = 128, .mla = mla});
}

struct Case {
    std::string name;
    bool lite = false, split = false;
    std::string quant;
    std::string backend;
    double tolerance;  // max |absorbed - naive| relative to the largest |naive logit|
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Deepseek2Mla : public ::testing::TestWithParam<Case> {};

// The absorbed form's logits, prefill of every position and decode after a 7-token prefill, equal the
// naive form's on the reference backend (doubles) within the tolerance.
TEST_P(Deepseek2Mla, AbsorbedMatchesNaive) {
    const Case& c = GetParam();
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    const std::string path = model_compare::write_model(mla_spec(c.lite, c.split), "deepseek2_mla_" + c.name, c.quant);
    const std::vector<int32_t> ids = prompt(19);
    auto naive = open_form(path, "reference", "naive");
    EXPECT_EQ(naive->info().kv_layout.n_kv_heads, 4);
    EXPECT_FALSE(naive->info().kv_layout.v_is_k);
    const std::vector<float> expected = SequenceRunner(*naive, false).prefill(0, ids, 64, true);
    auto absorbed = open_form(path, c.backend, "absorbed");
    EXPECT_EQ(absorbed->info().kv_layout.n_kv_heads, 1);
    EXPECT_EQ(absorbed->info().kv_layout.head_dim, 8 + 32);
    EXPECT_TRUE(absorbed->info().kv_layout.v_is_k);
    model_compare::expect_matches_reference(*absorbed, expected, ids, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, Deepseek2Mla,
                         ::testing::Values(Case{"v3_reference", false, false, "", "reference", 1e-6},
                                           Case{"lite_reference", true, false, "", "reference", 1e-6},
                                           Case{"v3_split_reference", false, true, "", "reference", 1e-6},
                                           Case{"lite_split_reference", true, true, "", "reference", 1e-6},
                                           Case{"v3_cpu", false, false, "", "cpu", 1e-5},
                                           Case{"lite_cpu", true, false, "", "cpu", 1e-5},
                                           Case{"lite_split_cpu", true, true, "", "cpu", 1e-5},
                                           Case{"v3_q8_0_reference", false, false, "q8_0", "reference", 1e-6},
                                           Case{"lite_q8_0_cpu", true, false, "q8_0", "cpu", 3e-2}),
                         [](const auto& info) { return info.param.name; });

// argmax of a logit row.
int32_t greedy(const std::vector<float>& logits) {
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Greedy decoding from the same prompt gives the same 24 tokens in both forms (CPU backend), and the
// tokens are not all one token.
TEST(Deepseek2MlaGreedy, TokensMatchTheNaiveForm) {
    for (const bool lite : {false, true}) {
        const std::string path = model_compare::write_model(mla_spec(lite, false), lite ? "deepseek2_mla_greedy_lite" : "deepseek2_mla_greedy_v3");
        std::vector<std::vector<int32_t>> tokens;
        for (const std::string mla : {"naive", "absorbed"}) {
            auto model = open_form(path, "cpu", mla);
            SequenceRunner runner(*model, false);
            std::vector<int32_t> out{greedy(runner.prefill(0, prompt(13, 3)))};
            while (out.size() < 24) out.push_back(greedy(runner.decode(0, out.back())));
            tokens.push_back(out);
        }
        EXPECT_EQ(tokens[0], tokens[1]) << (lite ? "V2-Lite form" : "V3 form");
        EXPECT_NE(std::count(tokens[1].begin(), tokens[1].end(), tokens[1][0]), 24);
    }
}

// A prompt whose first blocks come from the prefix cache (an earlier sequence's latent rows) gives the
// logits of the same prompt computed in full.
TEST(Deepseek2MlaPrefixCache, HitEqualsMiss) {
    const std::string path = model_compare::write_model(mla_spec(false, false), "deepseek2_mla_prefix");
    std::vector<int32_t> first = prompt(21, 5), second = first;
    for (int32_t t : prompt(6, 9)) second.push_back(t);
    auto cached = open_form(path, "cpu", "absorbed");
    SequenceRunner hit(*cached, true);
    hit.prefill(0, first);
    hit.release(0);
    const std::vector<float> got = hit.prefill(1, second);
    EXPECT_GE(hit.last_cached_tokens(), 16);  // 5 whole blocks of 4 tokens of `first`
    auto plain = open_form(path, "cpu", "absorbed");
    const std::vector<float> want = SequenceRunner(*plain, false).prefill(0, second);
    // Steps of other sizes may round differently (matmul panels), so near, with the same greedy token.
    ASSERT_EQ(got.size(), want.size());
    double scale = 0;
    for (float w : want) scale = std::max(scale, double(std::abs(w)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << i;
    EXPECT_EQ(greedy(got), greedy(want));
}

// The latent cache costs rope + kv_lora values a token and layer (K only), the naive one 2 x H x (nope +
// rope); the model's bytes per block follow.
TEST(Deepseek2MlaCache, BytesPerTokenAreTheLatentRow) {
    const std::string path = model_compare::write_model(mla_spec(false, false), "deepseek2_mla_bytes");
    auto absorbed = open_form(path, "cpu", "absorbed", 16);
    auto naive = open_form(path, "cpu", "naive", 16);
    const kv::KvLayout& a = absorbed->info().kv_layout;
    const kv::KvLayout& n = naive->info().kv_layout;
    EXPECT_EQ(a.bytes_per_token_layer(), size_t(8 + 32) * 4);
    EXPECT_EQ(n.bytes_per_token_layer(), size_t(2 * 4 * 24) * 4);
    EXPECT_EQ(absorbed->info().kv_bytes_per_block, size_t(16 * 3 * (8 + 32) * 4));
    EXPECT_EQ(naive->info().kv_bytes_per_block, size_t(16 * 3 * 2 * 4 * 24) * 4);
}

TEST(Deepseek2MlaCache, UnknownFormIsNamed) {
    const std::string path = model_compare::write_model(mla_spec(true, false), "deepseek2_mla_flag");
    try {
        open_form(path, "cpu", "latent");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--mla must be absorbed or naive, got 'latent'"), std::string::npos) << e.what();
    }
}

// The figure of docs/benchmarks.md: KV bytes per token per layer and the tokens an 8 GiB f16 cache holds,
// naive against absorbed, for DeepSeek V3 (61 layers, 128 heads) and V2-Lite (27 layers, 16 heads), both
// nope 128 + rope 64, kv_lora 512, from the layout code.
TEST(Deepseek2MlaCache, FigureForTheRealShapes) {
    struct Shape {
        const char* name;
        int32_t layers, heads;
    };
    const uint64_t budget = uint64_t(8) << 30;
    std::printf("| model | form | KV bytes / token / layer | KV bytes / token | tokens in 8 GiB |\n");
    for (const Shape& s : {Shape{"DeepSeek V3", 61, 128}, Shape{"DeepSeek V2-Lite", 27, 16}}) {
        const kv::KvLayout naive{.n_layers = s.layers, .n_kv_heads = s.heads, .head_dim = 128 + 64, .dtype = kv::KvDtype::f16};
        const kv::KvLayout absorbed{.n_layers = s.layers, .n_kv_heads = 1, .head_dim = 64 + 512, .dtype = kv::KvDtype::f16,
                                    .v_is_k = true};
        EXPECT_EQ(absorbed.bytes_per_token_layer(), size_t(576 * 2));
        EXPECT_EQ(naive.bytes_per_token_layer(), size_t(2 * s.heads * 192 * 2));
        for (const auto& [form, l] : {std::pair{"naive", naive}, std::pair{"absorbed", absorbed}}) {
            const int64_t tokens = kv::blocks_for_budget(budget, l) * l.block_size;
            EXPECT_EQ(tokens, int64_t(budget / l.bytes_per_block()) * l.block_size);
            std::printf("| %s | %s | %zu | %zu | %lld |\n", s.name, form, l.bytes_per_token_layer(),
                        l.bytes_per_token_layer() * size_t(l.n_layers), (long long)tokens);
        }
    }
}

}  // namespace
}  // namespace pagoda::model
