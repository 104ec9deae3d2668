// A token bucket: holds up to `capacity` units and refills continuously at `refill_per_second`.
// Time is passed in (seconds on any monotonic clock) so the arithmetic is testable with a fake
// clock. A take that does not fit is refused and says how long until it would; a take larger than
// the capacity can never fit (wait = infinity). Reservations corrected afterwards use give_back()
// (never above capacity) and charge() (may go below zero: the debt delays later takes).
#pragma once

namespace pagoda::server {

class TokenBucket {
public:
    TokenBucket() = default;
    TokenBucket(double capacity, double refill_per_second, double now);  // starts full

    // Seconds until `amount` is available (0: it is now); does not take.
    double wait_for(double amount, double now);
    // Takes `amount` when available; returns false (taking nothing) otherwise.
    bool try_take(double amount, double now);
    void give_back(double amount, double now);
    void charge(double amount, double now);

    double level(double now);
    double capacity() const { return capacity_; }

private:
    void refill(double now);

    double capacity_ = 0, rate_ = 0, level_ = 0, last_ = 0;
};

}  // namespace pagoda::server
