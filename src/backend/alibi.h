// ALiBi head slopes (Press et al., "Train Short, Test Long"), as ggml's soft_max computes them for
// a max bias b and n heads: with m = the largest power of two <= n,
//   slope_h = 2^(-b (h + 1) / m)                 for h < m
//   slope_h = 2^(-b (2 (h - m) + 1) / (2 m))     for h >= m (the odd steps of the 2m-head series)
// For b = 8 and n a power of two this is the paper's 2^(-8 (h + 1) / n); otherwise the
// interleaving the paper's reference code (and jina-bert-v2's modelling code) uses. An attention
// score then gets -slope_h * |pos_q - pos_k| added (AttentionParams::alibi_max_bias).
#pragma once
#include <cmath>
#include <cstdint>

namespace pagoda::backend {

inline double alibi_slope(int32_t head, int32_t n_heads, double max_bias) {
    int32_t m = 1;
    while (m * 2 <= n_heads) m *= 2;
    return head < m ? std::exp2(-max_bias * double(head + 1) / double(m))
                    : std::exp2(-max_bias * double(2 * (head - m) + 1) / double(2 * m));
}

}  // namespace pagoda::backend
