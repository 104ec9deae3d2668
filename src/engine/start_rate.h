// How fast waiting requests start, measured while requests wait: the basis of a deadline's
// early answer. A request arriving behind `ahead` waiting requests expects to start after about
// ahead / rate seconds. Each step the engine reports how long it took and how many requests it
// started for the first time; only steps that began with requests waiting count (an idle queue
// says nothing about its drain rate). Both sums decay with a time constant, so the rate follows a
// changing load within about that long and a burst of starts is not forgotten at once.
#pragma once
#include <cstdint>
#include <optional>

namespace pagoda::engine {

class StartRate {
public:
    explicit StartRate(double time_constant_seconds = 10.0) : tau_(time_constant_seconds) {}

    // A step of `seconds` that started `started` requests; `backlogged`: requests waited at its start.
    void observe(double seconds, int64_t started, bool backlogged);
    // Requests started per second while backlogged; nullopt until one start has been seen.
    std::optional<double> rate() const;
    // Seconds a request expects to wait behind `ahead` waiting requests: 0 with none ahead,
    // nullopt while the rate is unknown.
    std::optional<double> expected_wait(int64_t ahead) const;

private:
    double tau_;
    double started_ = 0, seconds_ = 0;  // decayed sums over backlogged steps
};

// A Retry-After for a client refused because of the queue: the whole seconds until `ahead` more
// waiting requests should have started at `rate` starts per second, at least 1; 1 when the rate is
// unknown (0) or nothing is ahead.
int64_t retry_after_seconds(int64_t ahead, double rate);

}  // namespace pagoda::engine
