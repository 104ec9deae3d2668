#include "engine/stop_matcher.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::engine {

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
    for (const auto& s : stops_)
        if (s.empty()) fail("stop strings must not be empty");
}

StopMatcher::Result StopMatcher::feed(const std::string& piece, bool may_stop) {
    if (stopped_) return {{}, true};
    held_ += piece;
    if (stops_.empty()) {
        Result r{std::move(held_), false};
        held_.clear();
        return r;
    }
    // Earliest occurrence of any stop string wins.
    // While stopping is suppressed, a stop string wholly inside the text is passed over; one whose
    // beginning is still held can complete (and stop) once stopping is allowed.
    size_t first = std::string::npos;
    const std::string* found = nullptr;
    if (may_stop)
        for (const auto& s : stops_)
            if (size_t at = held_.find(s); at < first) {
                first = at;
                found = &s;
            }
    if (first != std::string::npos) {
        stopped_ = true;
        matched_ = *found;
        Result r{held_.substr(0, include_stop_ ? first + found->size() : first), true};
        held_.clear();
        return r;
    }
    // Keep the longest suffix that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const auto& s : stops_) {
        size_t max_len = std::min(held_.size(), s.size() - 1);
        for (size_t len = max_len; len > keep; --len)
            if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
                keep = len;
                break;
            }
    }
    Result r{held_.substr(0, held_.size() - keep), false};
    held_.erase(0, held_.size() - keep);
    return r;
}

std::string StopMatcher::finish() {
    std::string rest = stopped_ ? std::string() : std::move(held_);
    held_.clear();
    return rest;
}

}  // namespace pagoda::engine
