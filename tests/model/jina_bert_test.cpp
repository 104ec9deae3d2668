// jina-bert-v2 (model/arch/bert.cpp) on random models from gen-model's writer, in both forms (-en:
// fused GEGLU ffn_up; -code: Q/K LayerNorms, attn_norm_2, ffn_gate and ffn_up apart):
//   - the reference backend equals a forward written here by hand from the GGUF's tensors, in
//     double, from llama.cpp's graph (token row + type-0 row, LayerNorm; per layer Q/K/V with
//     biases, optional Q/K LayerNorm, ALiBi attention with slopes 2^(-8(h+1)/n), output + bias,
//     post-norm(s); gelu(gate) * up, down + bias, post-norm) — an oracle independent of the builder;
//   - the CPU backend equals the reference (f32 and q8_0 weights), each sequence's rows are bitwise
//     the same alone as in a batch, and moving tokens changes rows (ALiBi sees positions);
//   - a device backend (vulkan) equals the reference and is batch-invariant the same way.
#include <cmath>
#include <gtest/gtest.h>

#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

constexpr int32_t kBlock = 4;
constexpr int64_t kDim = 96, kHeads = 6, kFfn = 64, kLayers = 2, kVocab = 300;

using Rows = std::vector<std::vector<double>>;

std::string write_jina(const std::string& name, bool code, const std::string& quant = "") {
    RandomModelSpec spec;
    spec.arch = "jina-bert-v2";
    spec.n_layers = kLayers; spec.dim = kDim; spec.n_heads = kHeads; spec.ffn_dim = kFfn; spec.vocab_size = kVocab;
    spec.context_length = 128;
    spec.qk_norm = code;
    spec.type = gguf::GgmlType::F32;
    spec.seed = code ? 5 : 4;
    const std::string path = test::temp_path(name + ".gguf");
    write_random_model(spec, nullptr, path);
    if (quant.empty()) return path;
    const std::string q = test::temp_path(name + "_" + quant + ".gguf");
    ThreadPool pool(2);
    quant::quantize_model({.input = path, .output = q, .target = quant}, pool);
    return q;
}

// The hand forward (f32 file only: reads the tensors' floats).
class HandJina {
public:
    explicit HandJina(const gguf::File& f) : f_(f) {}

    Rows forward(const std::vector<int32_t>& tokens) const {
        const size_t n = tokens.size();
        Rows x(n);
        for (size_t t = 0; t < n; ++t) {
            x[t] = row("token_embd.weight", kDim, tokens[t]);
            const std::vector<double> type0 = row("token_types.weight", kDim, 0);
            for (int64_t i = 0; i < kDim; ++i) x[t][size_t(i)] += type0[size_t(i)];
            x[t] = norm(x[t], "token_embd_norm");
        }
        const int64_t hd = kDim / kHeads;
        for (int64_t l = 0; l < kLayers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            Rows q(n), k(n), v(n), out(n);
            for (size_t t = 0; t < n; ++t) {
                q[t] = linear(x[t], p + "attn_q", kDim, kDim, true);
                k[t] = linear(x[t], p + "attn_k", kDim, kDim, true);
                v[t] = linear(x[t], p + "attn_v", kDim, kDim, true);
                if (has(p + "attn_q_norm.weight")) q[t] = norm(q[t], p + "attn_q_norm");
                if (has(p + "attn_k_norm.weight")) k[t] = norm(k[t], p + "attn_k_norm");
            }
            for (size_t t = 0; t < n; ++t) {
                std::vector<double> a(size_t(kDim), 0.0);
                for (int64_t h = 0; h < kHeads; ++h) {
                    // 6 heads: the 4-head series 2^(-2(h+1)), then the 8-head series' odd steps 2^(-1), 2^(-3).
                    const double slope = h < 4 ? std::pow(2.0, -2.0 * double(h + 1)) : std::pow(2.0, -double(2 * (h - 4) + 1));
                    std::vector<double> s(n);
                    double max = -1e300;
                    for (size_t j = 0; j < n; ++j) {
                        double dot = 0;
                        for (int64_t i = 0; i < hd; ++i) dot += q[t][size_t(h * hd + i)] * k[j][size_t(h * hd + i)];
                        s[j] = dot / std::sqrt(double(hd)) - slope * std::abs(double(t) - double(j));
                        max = std::max(max, s[j]);
                    }
                    double sum = 0;
                    for (double& e : s) sum += (e = std::exp(e - max));
                    for (size_t j = 0; j < n; ++j)
                        for (int64_t i = 0; i < hd; ++i) a[size_t(h * hd + i)] += s[j] / sum * v[j][size_t(h * hd + i)];
                }
                std::vector<double> o = linear(a, p + "attn_output", kDim, kDim, true);
                for (int64_t i = 0; i < kDim; ++i) o[size_t(i)] += x[t][size_t(i)];
                o = norm(o, p + "attn_output_norm");
                if (has(p + "attn_norm_2.weight")) {
                    for (int64_t i = 0; i < kDim; ++i) o[size_t(i)] += x[t][size_t(i)];
                    o = norm(o, p + "attn_norm_2");
                }
                std::vector<double> gate, up;
                if (has(p + "ffn_gate.weight")) {
                    gate = linear(o, p + "ffn_gate", kDim, kFfn, false);
                    up = linear(o, p + "ffn_up", kDim, kFfn, false);
                } else {  // fused: the gate's rows first
                    const std::vector<double> both = linear(o, p + "ffn_up", kDim, 2 * kFfn, false);
                    gate.assign(both.begin(), both.begin() + kFfn);
                    up.assign(both.begin() + kFfn, both.end());
                }
                std::vector<double> h(static_cast<size_t>(kFfn));
                for (int64_t i = 0; i < kFfn; ++i) {
                    const double g = gate[size_t(i)];
                    h[size_t(i)] = 0.5 * g * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[size_t(i)];
                }
                std::vector<double> f = linear(h, p + "ffn_down", kFfn, kDim, true);
                for (int64_t i = 0; i < kDim; ++i) f[size_t(i)] += o[size_t(i)];
                out[t] = norm(f, p + "layer_output_norm");
            }
            x = out;
        }
        return x;
    }

private:
    bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
    const float* data(const std::string& name, int64_t n) const {
        const gguf::TensorInfo* t = f_.find_tensor(name);
        if (!t || t->type != gguf::GgmlType::F32 || t->n_elements() != n) ADD_FAILURE() << name;
        return reinterpret_cast<const float*>(t->data);
    }
    std::vector<double> row(const std::string& name, int64_t cols, int64_t r) const {
        const gguf::TensorInfo* t = f_.find_tensor(name);
        const float* w = reinterpret_cast<const float*>(t->data) + r * cols;
        return {w, w + cols};
    }
    std::vector<double> linear(const std::vector<double>& in, const std::string& name, int64_t cols, int64_t rows,
                               bool bias) const {
        const float* w = data(name + ".weight", cols * rows);
        std::vector<double> y(size_t(rows), 0.0);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) y[size_t(r)] += double(w[r * cols + c]) * in[size_t(c)];
        if (bias) {
            const float* b = data(name + ".bias", rows);
            for (int64_t r = 0; r < rows; ++r) y[size_t(r)] += b[r];
        }
        return y;
    }
    std::vector<double> norm(const std::vector<double>& in, const std::string& name) const {
        const int64_t n = int64_t(in.size());
        const float* w = data(name + ".weight", n);
        const float* b = data(name + ".bias", n);
        double mean = 0, var = 0;
        for (double e : in) mean += e;
        mean /= double(n);
        for (double e : in) var += (e - mean) * (e - mean);
        var /= double(n);
        std::vector<double> y(in.size());
        for (int64_t i = 0; i < n; ++i) y[size_t(i)] = (in[size_t(i)] - mean) / std::sqrt(var + 1e-12) * w[i] + b[i];
        return y;
    }
    const gguf::File& f_;
};

struct Seq {
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
};

Batch encoder_batch(const std::vector<Seq>& seqs) {
    Batch b;
    for (const Seq& s : seqs) {
        const int32_t index = b.add_sequence(s.blocks);
        for (size_t p = 0; p < s.tokens.size(); ++p)
            b.add(s.tokens[p], int32_t(p), index, int64_t(s.blocks[p / kBlock]) * kBlock + int64_t(p) % kBlock, false, true);
    }
    return b;
}

std::vector<Seq> placed(const std::vector<std::vector<int32_t>>& tokens, int32_t first_block = 0) {
    std::vector<Seq> seqs;
    int32_t next = first_block;
    for (const auto& t : tokens) {
        Seq s{t, {}};
        for (size_t i = 0; i < (t.size() + kBlock - 1) / kBlock; ++i) s.blocks.push_back(next++);
        seqs.push_back(std::move(s));
    }
    return seqs;
}

std::vector<int32_t> tokens_of(int n, int seed) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + seed * 11 + 5) % kVocab));
    return t;
}

StepModelOptions options(const std::string& backend) {
    return {.backend = backend, .threads = 2, .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32}, .tokens_wanted = 256};
}

double worst_gap(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    return worst;
}

class JinaBert : public ::testing::TestWithParam<bool> {};  // true: the -code form

TEST_P(JinaBert, ReferenceEqualsTheHandForward) {
    const std::string path = write_jina(GetParam() ? "jina_code_hand" : "jina_en_hand", GetParam());
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    EXPECT_EQ(file->find_tensor("blk.0.ffn_gate.weight") != nullptr, GetParam());
    EXPECT_EQ(file->find_tensor("blk.0.attn_q_norm.weight") != nullptr, GetParam());
    EXPECT_EQ(file->find_tensor("position_embd.weight"), nullptr);
    auto reference = open_step_model(file, options("reference"));
    EXPECT_TRUE(reference->info().embedding_only);
    EXPECT_TRUE(reference->info().bidirectional);
    EXPECT_EQ(reference->info().max_context, 128);
    const std::vector<int32_t> tokens = tokens_of(11, 3);
    reference->forward(encoder_batch(placed({tokens})));
    const std::vector<float>& got = reference->hidden_rows();
    const Rows want = HandJina(*file).forward(tokens);
    ASSERT_EQ(got.size(), tokens.size() * size_t(kDim));
    double worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t)
        for (int64_t i = 0; i < kDim; ++i) worst = std::max(worst, std::abs(got[t * size_t(kDim) + size_t(i)] - want[t][size_t(i)]));
    EXPECT_LT(worst, 1e-5);  // double against double, up to the f32 the hidden rows are handed out in
}

TEST_P(JinaBert, CpuMatchesTheReferenceAndIsBatchInvariant) {
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(write_jina(GetParam() ? "jina_code" : "jina_en", GetParam())));
    auto cpu = open_step_model(file, options("cpu"));
    auto reference = open_step_model(file, options("reference"));
    // Mixed lengths, one longer than an attention tile (64 keys).
    const std::vector<Seq> seqs = placed({tokens_of(70, 1), tokens_of(5, 2), tokens_of(23, 3)});
    const Batch batch = encoder_batch(seqs);
    cpu->forward(batch);
    const std::vector<float> got = cpu->hidden_rows();
    reference->forward(batch);
    EXPECT_LT(worst_gap(got, reference->hidden_rows()), 1e-4);

    size_t row = 0;
    for (const Seq& s : seqs) {
        Seq alone = s;
        for (auto& b : alone.blocks) b += 30;  // other physical blocks
        cpu->forward(encoder_batch({alone}));
        const std::vector<float>& rows = cpu->hidden_rows();
        ASSERT_EQ(rows.size(), s.tokens.size() * size_t(kDim));
        for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], got[row * size_t(kDim) + i]) << "element " << i;
        row += s.tokens.size();
    }

    // ALiBi sees positions: rotating a sequence's tokens changes the rows of the tokens it moves
    // (without positions the rows would move with their tokens unchanged).
    std::vector<int32_t> rotated = seqs[1].tokens;
    std::rotate(rotated.begin(), rotated.begin() + 1, rotated.end());
    cpu->forward(encoder_batch(placed({rotated})));
    const std::vector<float> moved(cpu->hidden_rows().begin(), cpu->hidden_rows().begin() + kDim);  // token 1, now at 0
    const std::vector<float> before(got.begin() + (70 + 1) * kDim, got.begin() + (70 + 2) * kDim);
    EXPECT_GT(worst_gap(moved, before), 1e-3);
}

TEST_P(JinaBert, Q8CpuMatchesTheReference) {
    auto file = std::shared_ptr<const gguf::File>(
        gguf::File::open(write_jina(GetParam() ? "jina_code" : "jina_en", GetParam(), "q8_0")));
    EXPECT_EQ(file->find_tensor("blk.0.ffn_up.weight")->type, gguf::GgmlType::Q8_0);
    auto cpu = open_step_model(file, options("cpu"));
    auto reference = open_step_model(file, options("reference"));
    const Batch batch = encoder_batch(placed({tokens_of(30, 5), tokens_of(9, 6)}));
    cpu->forward(batch);
    reference->forward(batch);
    // The CPU rounds activations to int8 for q8_0 matmuls: a few 1e-2 at worst on LayerNorm-scaled
    // rows, far less on average.
    const std::vector<float>& got = cpu->hidden_rows();
    const std::vector<float>& want = reference->hidden_rows();
    EXPECT_LT(worst_gap(got, want), 0.1);
    double mean = 0;
    for (size_t i = 0; i < got.size(); ++i) mean += std::abs(double(got[i]) - want[i]) / double(got.size());
    EXPECT_LT(mean, 1e-2);
}

// A device backend (vulkan: ALiBi in its attention shader) matches the reference over mixed lengths,
// one past a 64-key attention chunk, and gives each sequence bitwise its rows alone.
TEST_P(JinaBert, DeviceMatchesTheReferenceAndIsBatchInvariant) {
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(write_jina(GetParam() ? "jina_code_dev" : "jina_en_dev", GetParam())));
    const std::vector<Seq> seqs = placed({tokens_of(70, 1), tokens_of(5, 2), tokens_of(23, 3)});
    const Batch batch = encoder_batch(seqs);
    auto reference = open_step_model(file, options("reference"));
    reference->forward(batch);
    for (const std::string& device : backend::testing::device_backends_under_test()) {
        auto model = open_step_model(file, options(device));
        model->forward(batch);
        const std::vector<float> got = model->hidden_rows();
        EXPECT_LT(worst_gap(got, reference->hidden_rows()), 1e-4) << device;
        size_t row = 0;
        for (const Seq& s : seqs) {
            Seq alone = s;
            for (auto& b : alone.blocks) b += 30;
            model->forward(encoder_batch({alone}));
            const std::vector<float>& rows = model->hidden_rows();
            ASSERT_EQ(rows.size(), s.tokens.size() * size_t(kDim)) << device;
            for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], got[row * size_t(kDim) + i]) << device << " element " << i;
            row += s.tokens.size();
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Forms, JinaBert, ::testing::Bool(),
                         [](const auto& info) { return info.param ? std::string("code") : std::string("en"); });

}  // namespace
}  // namespace pagoda::model
