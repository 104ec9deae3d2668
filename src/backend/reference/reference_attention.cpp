#include "backend/reference/reference_attention.h"

#include <algorithm>
#include <cmath>

#include "backend/reference/reference_math.h"

namespace pagoda::backend::reference {

void attend_head(const ReferenceKvCache& cache, int32_t layer, int32_t kv_head, const std::vector<int64_t>& slots,
                 const double* q, const AttentionParams& params, double* out, const double* sink,
                 const std::vector<double>& bias) {
    const int32_t d = cache.layout().head_dim;
    const double cap = params.softcap;
    std::vector<double> p(slots.size());
    for (size_t j = 0; j < slots.size(); ++j) {
        const double* k = cache.k_row(layer, slots[j], kv_head);
        double dot = 0;
        for (int32_t i = 0; i < d; ++i) dot += q[i] * k[i];
        const double score = double(params.scale) * dot;
        p[j] = (cap > 0 ? cap * std::tanh(score / cap) : score) + (bias.empty() ? 0.0 : bias[j]);
    }
    if (sink) {  // one more logit in the denominator, with no value row
        p.push_back(*sink);
        softmax_row(p.data(), int64_t(p.size()));
        p.pop_back();
    } else {
        softmax_row(p.data(), int64_t(p.size()));
    }
    std::fill_n(out, d, 0.0);
    for (size_t j = 0; j < slots.size(); ++j) {
        const double* v = cache.v_row(layer, slots[j], kv_head);
        for (int32_t i = 0; i < d; ++i) out[i] += p[j] * v[i];
    }
}

}  // namespace pagoda::backend::reference
