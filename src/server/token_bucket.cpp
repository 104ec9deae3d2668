#include "server/token_bucket.h"

#include <algorithm>
#include <limits>

namespace pagoda::server {

TokenBucket::TokenBucket(double capacity, double refill_per_second, double now)
    : capacity_(capacity), rate_(refill_per_second), level_(capacity), last_(now) {}

void TokenBucket::refill(double now) {
    if (now > last_) {  // a clock that steps back refills nothing rather than draining
        level_ = std::min(capacity_, level_ + (now - last_) * rate_);
        last_ = now;
    }
}

double TokenBucket::level(double now) {
    refill(now);
    return level_;
}

double TokenBucket::wait_for(double amount, double now) {
    refill(now);
    if (amount > capacity_ || rate_ <= 0) return amount <= level_ ? 0.0 : std::numeric_limits<double>::infinity();
    if (amount <= level_) return 0.0;
    return (amount - level_) / rate_;
}

bool TokenBucket::try_take(double amount, double now) {
    if (wait_for(amount, now) > 0) return false;
    level_ -= amount;
    return true;
}

void TokenBucket::give_back(double amount, double now) {
    refill(now);
    level_ = std::min(capacity_, level_ + amount);
}

void TokenBucket::charge(double amount, double now) {
    refill(now);
    level_ -= amount;
}

}  // namespace pagoda::server
