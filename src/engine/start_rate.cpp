#include "engine/start_rate.h"

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

}  // namespace pagoda::engine
