// The dense architectures beyond the llama family (gemma2, gemma3, phi3) and llama 3 RoPE scaling:
// what reference agreement (reference_model_test.cpp) cannot show, because both backends run the
// same graph — the Llama 3.1 frequency factors against values from the published formula, LongRoPE's
// factor choice and attention factor, the per-layer window pattern, the sliding window and soft caps
// changing exactly the logits they should, the fused Phi-3 tensors splitting as separate ones would,
// and load errors naming the missing tensor or key.
#include <cmath>
#include <gtest/gtest.h>
#include <functional>
#include <set>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/arch/phi3_rope.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/sliding_window.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

RandomModelSpec small(const std::string& arch, uint64_t seed) {
    RandomModelSpec s;
    s.arch = arch; s.n_layers = 2; s.dim = 48; s.n_heads = 6; s.n_kv_heads = 2; s.ffn_dim = 72; s.vocab_size = 300;
    s.head_dim = 16; s.seed = seed;
    return s;
}

std::string write(const RandomModelSpec& spec, const std::string& name) {
    const std::string path = test::temp_path(name + ".gguf");
    write_random_model(spec, nullptr, path);
    return path;
}

// Copies a GGUF, leaving out `drop` (tensors and keys by name) and setting `extra` keys; `edit` may
// add tensors.
void rewrite(const std::string& in_path, const std::string& out_path, const std::set<std::string>& drop,
             const std::vector<std::pair<std::string, gguf::Value>>& extra = {},
             const std::function<void(const gguf::File&, gguf::Writer&)>& edit = {}) {
    auto in = gguf::File::open(in_path);
    gguf::Writer w;
    for (const auto& [key, value] : in->metadata())
        if (!drop.count(key)) w.set(key, value);
    for (const auto& [key, value] : extra) w.set(key, value);
    for (const auto& t : in->tensors())
        if (!drop.count(t.name)) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    if (edit) edit(*in, w);
    w.write(out_path);
}

// All logits of a prompt run as one prefill.
std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& tokens, int64_t max_context = 0) {
    auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                        .tokens_wanted = 64, .max_context = max_context});
    SequenceRunner runner(*model, false);
    return runner.prefill(0, tokens, 64, true);
}

std::vector<int32_t> prompt(int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back((i * 37 + 11) % 300);
    return out;
}

std::string load_error(const std::string& path) {
    try {
        open_step_model(path, {.threads = 1, .kv = {.block_size = 4}, .tokens_wanted = 16});
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// Meta's apply_scaling (factor 8, low 1, high 4, original context 8192) on Llama 3.1's base 500000
// and head size 128, evaluated independently: freq / new_freq for the pairs around the smoothing band.
TEST(Llama3RopeScaling, FactorsMatchThePublishedFormula) {
    const std::vector<float> f = llama3_rope_factors({}, 500000.0, 128);
    ASSERT_EQ(f.size(), 64u);
    const std::pair<int, double> expected[] = {
        {0, 1.0}, {28, 1.0}, {29, 1.207483871283662}, {30, 1.5534146285049255}, {31, 2.0263132059050557},
        {32, 2.694529687894733}, {33, 3.6842525277457185}, {34, 5.257326588708467}, {35, 8.0}, {63, 8.0}};
    for (auto [i, want] : expected) EXPECT_NEAR(f[size_t(i)], want, 1e-6 * want) << "pair " << i;
    for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]) << "factors grow with the wavelength";
}

// llama.rope.scaling.type "llama3" with its parameters as keys gives the very logits that the
// rope_freqs.weight tensor llama.cpp's converter writes does; and they differ from no scaling.
TEST(Llama3RopeScaling, KeysAndTensorGiveTheSameModel) {
    RandomModelSpec s = small("llama", 21);
    s.rope_theta = 5e5f; s.context_length = 64;
    s.rope_scaling = "llama3";
    const std::string tensor = write(s, "llama3_tensor");
    s.rope_scaling = "llama3_keys";
    const std::string keys = write(s, "llama3_keys");
    s.rope_scaling.clear();
    const std::string plain = write(s, "llama3_plain");
    const auto ids = prompt(12);
    EXPECT_EQ(logits_of(tensor, ids), logits_of(keys, ids));
    EXPECT_NE(logits_of(tensor, ids), logits_of(plain, ids));
    EXPECT_NE(gguf::File::open(tensor)->find_tensor("rope_freqs.weight"), nullptr);
}

TEST(Llama3RopeScaling, RejectsBadParameters) {
    RandomModelSpec s = small("llama", 22);
    s.rope_scaling = "llama3_keys";
    const std::string path = write(s, "llama3_bad_src");
    const std::string bad = test::temp_path("llama3_bad.gguf");
    rewrite(path, bad, {}, {{"llama.rope.scaling.high_freq_factor", gguf::Value::f32(0.5f)}});
    EXPECT_NE(load_error(bad).find("high_freq_factor"), std::string::npos) << load_error(bad);
}

// LongRoPE: long factors exactly when the context the model runs at exceeds the original one; the
// attention factor from the key, or the published formula without it.
TEST(Phi3LongRope, FactorChoiceFollowsTheRunContext) {
    RandomModelSpec s = small("phi3", 23);
    s.context_length = 2048; s.original_context = 512;
    const std::string path = write(s, "phi3_longrope");
    auto file = gguf::File::open(path);
    ModelConfig c = read_config(*file);
    EXPECT_EQ(read_long_rope(*file, c).factors_tensor, "rope_factors_long.weight");  // trained context 2048
    c.max_context = 512;
    EXPECT_EQ(read_long_rope(*file, c).factors_tensor, "rope_factors_short.weight");
    c.max_context = 513;
    EXPECT_TRUE(read_long_rope(*file, c).long_factors);
    const double formula = std::sqrt(1 + std::log(4.0) / std::log(512.0));
    EXPECT_NEAR(read_long_rope(*file, c).attn_factor, formula, 1e-6);
    const std::string no_key = test::temp_path("phi3_no_attn_factor.gguf");
    rewrite(path, no_key, {"phi3.rope.scaling.attn_factor"});
    EXPECT_NEAR(read_long_rope(*gguf::File::open(no_key), c).attn_factor, formula, 1e-12);
    // The choice reaches the model: running at the original context changes the logits.
    const auto ids = prompt(12);
    EXPECT_NE(logits_of(path, ids, 512), logits_of(path, ids, 2048));
    EXPECT_EQ(logits_of(path, ids, 2048), logits_of(path, ids, 0));
    const std::string one = test::temp_path("phi3_one_factor.gguf");
    rewrite(path, one, {"rope_factors_short.weight"});
    EXPECT_NE(load_error(one).find("rope_factors_short.weight"), std::string::npos) << load_error(one);
}

// Phi-3's fused attn_qkv splits into Q, K, V rows as three tensors of those rows would.
TEST(Phi3, FusedQkvEqualsSeparateTensors) {
    RandomModelSpec s = small("phi3", 24);
    const std::string fused = write(s, "phi3_fused");
    const std::string separate = test::temp_path("phi3_separate.gguf");
    std::set<std::string> drop = {"blk.0.attn_qkv.weight", "blk.1.attn_qkv.weight"};
    rewrite(fused, separate, drop, {}, [&](const gguf::File& in, gguf::Writer& w) {
        for (int l = 0; l < 2; ++l) {
            const auto* t = in.find_tensor("blk." + std::to_string(l) + ".attn_qkv.weight");
            const size_t row = size_t(t->shape[0]) * 4;
            int64_t at = 0;
            for (auto [name, rows] : {std::pair{"attn_q", 96}, std::pair{"attn_k", 32}, std::pair{"attn_v", 32}}) {
                w.add_tensor("blk." + std::to_string(l) + "." + name + ".weight", t->type, {t->shape[0], rows},
                             t->data + size_t(at) * row, uint64_t(rows) * row);
                at += rows;
            }
        }
    });
    const auto ids = prompt(10);
    EXPECT_EQ(logits_of(fused, ids), logits_of(separate, ids));
}

TEST(SlidingWindow, LayerPatterns) {
    const std::string g2 = write([] { auto s = small("gemma2", 25); s.n_layers = 4; s.sliding_window = 7; return s; }(), "pat_g2");
    EXPECT_EQ(layer_windows(*gguf::File::open(g2), "gemma2", 4, 7, 2), (std::vector<int32_t>{7, 0, 7, 0}));
    const std::string g3 = write([] { auto s = small("gemma3", 26); s.n_layers = 7; s.sliding_window = 9; return s; }(), "pat_g3");
    EXPECT_EQ(layer_windows(*gguf::File::open(g3), "gemma3", 7, 9, 6), (std::vector<int32_t>{9, 9, 9, 9, 9, 0, 9}));
    const std::string period = test::temp_path("pat_period.gguf");
    rewrite(g3, period, {}, {{"gemma3.attention.sliding_window_pattern", gguf::Value::u32(3)}});
    EXPECT_EQ(layer_windows(*gguf::File::open(period), "gemma3", 7, 9, 6), (std::vector<int32_t>{9, 9, 0, 9, 9, 0, 9}));
    const std::string bools = test::temp_path("pat_bools.gguf");
    std::vector<gguf::Value> items;
    for (bool b : {true, false, false, true, true, true, false}) items.push_back(gguf::Value::boolean(b));
    rewrite(g3, bools, {}, {{"gemma3.attention.sliding_window_pattern", gguf::Value::array(gguf::ValueType::boolean, items)}});
    EXPECT_EQ(layer_windows(*gguf::File::open(bools), "gemma3", 7, 9, 6), (std::vector<int32_t>{9, 0, 0, 9, 9, 9, 0}));
    EXPECT_THROW(layer_windows(*gguf::File::open(bools), "gemma3", 6, 9, 6), Error);  // 7 entries for 6 layers
    EXPECT_EQ(layer_windows(*gguf::File::open(bools), "gemma3", 7, 0, 6), std::vector<int32_t>(7, 0));
}

// A window W changes nothing for positions < W (every key is inside it) and changes the logits of
// later positions; on gemma2 only the sliding layer 0 has it.
TEST(SlidingWindow, ChangesExactlyThePositionsPastTheWindow) {
    const auto ids = prompt(14);
    for (const char* arch : {"gemma2", "phi3"}) {
        RandomModelSpec s = small(arch, 27);
        s.sliding_window = 4096;
        const auto wide = logits_of(write(s, std::string(arch) + "_wide"), ids);
        s.sliding_window = 5;
        const auto narrow = logits_of(write(s, std::string(arch) + "_narrow"), ids);
        const size_t vocab = 300;
        for (size_t p = 0; p < ids.size(); ++p) {
            const std::vector<float> a(wide.begin() + long(p * vocab), wide.begin() + long((p + 1) * vocab));
            const std::vector<float> b(narrow.begin() + long(p * vocab), narrow.begin() + long((p + 1) * vocab));
            if (p < 5) EXPECT_EQ(a, b) << arch << " position " << p;
            else EXPECT_NE(a, b) << arch << " position " << p;
        }
    }
}

// Gemma 2's final soft cap bounds every logit by the cap and keeps the argmax.
TEST(Gemma2, FinalSoftCapBoundsLogits) {
    RandomModelSpec s = small("gemma2", 28);
    s.final_softcap = 1e6f;  // no cap in effect
    const auto free = logits_of(write(s, "gemma2_nocap"), prompt(8));
    s.final_softcap = 0.5f;
    const auto capped = logits_of(write(s, "gemma2_cap"), prompt(8));
    ASSERT_EQ(free.size(), capped.size());
    for (size_t i = 0; i < free.size(); ++i) {
        EXPECT_LE(std::fabs(capped[i]), 0.5f);
        EXPECT_NEAR(capped[i], 0.5 * std::tanh(free[i] / 0.5), 1e-5) << i;
    }
}

TEST(DenseArchErrors, MissingTensorsAndKeysAreNamed) {
    const std::string g2 = write(small("gemma2", 29), "err_g2");
    const std::string no_post = test::temp_path("err_no_post.gguf");
    rewrite(g2, no_post, {"blk.1.post_ffw_norm.weight"});
    EXPECT_NE(load_error(no_post).find("blk.1.post_ffw_norm.weight"), std::string::npos) << load_error(no_post);
    const std::string g3 = write(small("gemma3", 30), "err_g3");
    const std::string no_qnorm = test::temp_path("err_no_qnorm.gguf");
    rewrite(g3, no_qnorm, {"blk.0.attn_q_norm.weight"});
    EXPECT_NE(load_error(no_qnorm).find("blk.0.attn_q_norm.weight"), std::string::npos) << load_error(no_qnorm);
    const std::string no_window = test::temp_path("err_no_window.gguf");
    rewrite(g3, no_window, {"gemma3.attention.sliding_window"});
    EXPECT_NE(load_error(no_window).find("gemma3.attention.sliding_window"), std::string::npos) << load_error(no_window);
    const std::string p3 = write(small("phi3", 31), "err_p3");
    const std::string no_up = test::temp_path("err_no_up.gguf");
    rewrite(p3, no_up, {"blk.0.ffn_up.weight"});
    EXPECT_NE(load_error(no_up).find("blk.0.ffn_up.weight"), std::string::npos) << load_error(no_up);
    const std::string other = test::temp_path("err_arch.gguf");
    rewrite(p3, other, {}, {{"general.architecture", gguf::Value::string("gemma7")}});
    EXPECT_NE(load_error(other).find("architecture 'gemma7' is not supported"), std::string::npos) << load_error(other);
    EXPECT_NE(load_error(other).find("gemma3"), std::string::npos) << "the supported list names the new ones";
}

}  // namespace
}  // namespace pagoda::model
