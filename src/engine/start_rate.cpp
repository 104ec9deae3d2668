#include "engine/start_rate.h"

#include <algorithm>
#include <cmath>

namespace pagoda::engine {

void StartRate::observe(double seconds, int64_t started, bool backlogged) {
    if (!backlogged || !(seconds >= 0)) return;
    const double keep = std::exp(-seconds / tau_);
    started_ = started_ * keep + double(started);
    seconds_ = seconds_ * keep + seconds;
}

std::optional<double> StartRate::rate() const {
    if (started_ <= 0 || seconds_ <= 0) return std::nullopt;
    return started_ / seconds_;
}

std::optional<double> StartRate::expected_wait(int64_t ahead) const {
    if (ahead <= 0) return 0.0;
    const std::optional<double> r = rate();
    if (!r) return std::nullopt;
    return double(ahead) / *r;
}

int64_t retry_after_seconds(int64_t ahead, double rate) {
    if (ahead <= 0 || !(rate > 0)) return 1;
    const double s = std::ceil(double(ahead) / rate);
    return s >= 3600 ? 3600 : std::max<int64_t>(1, int64_t(s));  // an hour: no estimate is worth more
}

}  // namespace pagoda::engine
