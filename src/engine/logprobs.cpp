#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pagoda::engine {

LogSoftmax log_softmax_of(const float* logits, int64_t vocab) {
    LogSoftmax n;
    n.max = -INFINITY;
    for (int64_t i = 0; i < vocab; ++i) n.max = std::max(n.max, double(logits[i]));
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - n.max);
    n.log_sum = std::log(sum);
    return n;
}

TokenLogprob top_logprobs(const float* logits, int64_t vocab, const LogSoftmax& norm, int32_t top) {
    TokenLogprob out;
    const size_t k = size_t(std::clamp<int64_t>(top, 0, vocab));
    if (k == 0) return out;
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) ids[size_t(i)] = int32_t(i);
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    out.top.reserve(k);
    for (size_t i = 0; i < k; ++i) {
        if (std::isinf(logits[ids[i]]) && logits[ids[i]] < 0) break;  // masked out: not an alternative
        out.top.push_back({ids[i], float(double(logits[ids[i]]) - norm.max - norm.log_sum)});
    }
    return out;
}

}  // namespace pagoda::engine
