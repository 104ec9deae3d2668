// Causal softmax attention in doubles for the tests that evaluate a model's equations directly from
// an F32 file (the independent check on the reference backend): position `s` attends to positions
// first..s; query head hh reads key/value head hh / (H / KV).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace pagoda::model::direct {

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
