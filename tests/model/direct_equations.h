// The pieces the tests share that evaluate a model's equations directly, in doubles, from an F32
// gen-model file (the independent check on the reference backend): the file's F32 weights, y = W x,
// causal softmax attention, and the comparison of the reference's logits with the equations'.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"

namespace pagoda::model::direct {

// The F32 tensors of a file (anything else throws), for a Direct evaluator to derive from.
struct Weights {
    const gguf::File& f;
    const float* tensor(const std::string& name) const {
        const auto* info = f.find_tensor(name);
        if (!info || info->type != gguf::GgmlType::F32) throw std::runtime_error("no f32 tensor " + name);
        return reinterpret_cast<const float*>(info->data);
    }
    bool has(const std::string& name) const { return f.find_tensor(name) != nullptr; }
    // y = W x, W stored [cols, rows]; `first` skips that many rows.
    static std::vector<double> mul(const float* w, const std::vector<double>& x, int64_t rows, int64_t first = 0) {
        std::vector<double> y(size_t(rows), 0.0);
        for (int64_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < x.size(); ++c) y[size_t(r)] += double(w[size_t(r + first) * x.size() + c]) * x[c];
        return y;
    }
    // RMS norm times the weight w.
    // RMS norm of the n values at x (a head, or a whole row) times the weight w.
    static std::vector<double> rms_norm(const double* x, size_t n, const float* w, double eps) {
        return rms_norm(std::vector<double>(x, x + n), w, eps);
    }
    static std::vector<double> rms_norm(std::vector<double> x, const float* w, double eps) {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double inv = 1 / std::sqrt(ss / double(x.size()) + eps);
        for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] * inv * w[i];
        return x;
    }
    // The token embedding rows of `ids`, `dim` wide.
    std::vector<std::vector<double>> embed(const std::vector<int32_t>& ids, int64_t dim) const {
        std::vector<std::vector<double>> x(ids.size());
        for (size_t t = 0; t < ids.size(); ++t) {
            const float* e = tensor("token_embd.weight") + size_t(ids[t]) * size_t(dim);
            x[t].assign(e, e + dim);
        }
        return x;
    }
    // Every position's logits, one `vocab` row each: output_norm, then output.weight.
    std::vector<double> output_logits(const std::vector<std::vector<double>>& x, double eps, int64_t vocab) const {
        std::vector<double> all;
        for (const auto& row : x) {
            const auto o = mul(tensor("output.weight"), rms_norm(row, tensor("output_norm.weight"), eps), vocab);
            all.insert(all.end(), o.begin(), o.end());
        }
        return all;
    }
};

// The largest |value|: the scale the comparisons are relative to.
inline double largest_abs(const std::vector<double>& want) {
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::abs(w));
    return scale;
}

// Every logit the reference computed within `rel` x the largest |equation logit|.
inline void expect_logits_near(const std::vector<float>& got, const std::vector<double>& want, double rel, const std::string& label) {
    ASSERT_EQ(got.size(), want.size());
    const double scale = largest_abs(want);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], rel * scale) << label << " logit " << i;
}

// Causal softmax attention: position `s` attends to positions first..s; query head hh reads
// key/value head hh / (H / KV).

using Rows = std::vector<std::vector<double>>;  // one row per position: heads x head size

// The H x hv output row of position `s`: q rows hold H heads of hk, k rows KV heads of hk, v rows KV
// heads of hv; scores are q.k / `scale`.
inline std::vector<double> attend(const Rows& q, const Rows& k, const Rows& v, int64_t s, int64_t H, int64_t KV, int64_t hk,
                                  int64_t hv, double scale, int64_t first = 0) {
    std::vector<double> out(size_t(H * hv), 0.0);
    for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t kh = hh / (H / KV);
        std::vector<double> score;
        double top = -1e300, sum = 0;
        for (int64_t j = first; j <= s; ++j) {
            double d = 0;
            for (int64_t i = 0; i < hk; ++i) d += q[size_t(s)][size_t(hh * hk + i)] * k[size_t(j)][size_t(kh * hk + i)];
            score.push_back(d / scale);
            top = std::max(top, score.back());
        }
        for (double& e : score) sum += (e = std::exp(e - top));
        for (int64_t j = first; j <= s; ++j)
            for (int64_t i = 0; i < hv; ++i)
                out[size_t(hh * hv + i)] += score[size_t(j - first)] / sum * v[size_t(j)][size_t(kh * hv + i)];
    }
    return out;
}

}  // namespace pagoda::model::direct
