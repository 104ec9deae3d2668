// The engine's clock: std::chrono::steady_clock plus an offset that only tests move. A test's fake
// model "takes" a step's time by advancing the offset instead of sleeping, so what the engine
// measures (the draft cost model's step and forward times, request timings) is exactly what the
// test says, however loaded the machine. Outside tests the offset stays 0. Never goes backwards.
#pragma once
#include <atomic>
#include <chrono>

namespace pagoda::engine {

struct Clock {
    using base = std::chrono::steady_clock;
    using duration = base::duration;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = base::time_point;  // interchangeable with steady_clock's
    static constexpr bool is_steady = true;

    static time_point now() noexcept { return base::now() + duration(offset_.load(std::memory_order_relaxed)); }
    // Tests only: every later now() reads `d` later.
    static void advance_for_tests(duration d) noexcept { offset_.fetch_add(d.count(), std::memory_order_relaxed); }

private:
    static inline std::atomic<rep> offset_{0};
};

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

}  // namespace pagoda::engine
