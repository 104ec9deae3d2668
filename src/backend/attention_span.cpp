#include "backend/attention_span.h"

#include <map>
#include <utility>

namespace pagoda::backend {

std::vector<int32_t> attention_span_starts(std::span<const int32_t> seq_index, std::span<const int32_t> positions,
                                           std::span<const int32_t> attend_until) {
    if (attend_until.empty()) return {};
    std::map<std::pair<int32_t, int32_t>, int32_t> lowest;  // (sequence, attend_until) -> lowest position
    for (size_t t = 0; t < attend_until.size(); ++t) {
        const auto [it, added] = lowest.try_emplace({seq_index[t], attend_until[t]}, positions[t]);
        if (!added) it->second = std::min(it->second, positions[t]);
    }
    std::vector<int32_t> starts(attend_until.size());
    for (size_t t = 0; t < attend_until.size(); ++t) starts[t] = lowest.at({seq_index[t], attend_until[t]});
    return starts;
}

}  // namespace pagoda::backend
