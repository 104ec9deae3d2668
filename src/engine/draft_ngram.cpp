#include "engine/draft_ngram.h"

#include <algorithm>

namespace pagoda::engine {

std::vector<int32_t> propose_ngram_draft(std::span<const int32_t> context, int32_t n_min, int32_t n_max,
                                         int32_t max_tokens) {
    const int64_t size = int64_t(context.size());
    if (max_tokens < 1 || n_min < 1) return {};
    for (int64_t n = std::min<int64_t>(n_max, size - 1); n >= n_min; --n) {
        const auto suffix = context.subspan(size_t(size - n));
        // Most recent first: recent text predicts the next tokens best. A match must end before the
        // suffix starts so something follows it.
        for (int64_t start = size - n - 1; start >= 0; --start) {
            if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
            const int64_t from = start + n;
            const int64_t count = std::min<int64_t>(max_tokens, size - from);
            return {context.begin() + from, context.begin() + from + count};
        }
    }
    return {};
}

}  // namespace pagoda::engine
