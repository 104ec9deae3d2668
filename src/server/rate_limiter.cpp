#include "server/rate_limiter.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace pagoda::server {

const char* reject_reason_name(RejectReason r) {
    switch (r) {
        case RejectReason::rpm: return "rpm";
        case RejectReason::tpm: return "tpm";
        case RejectReason::concurrency: return "concurrency";
        case RejectReason::too_large: return "too_large";
    }
    return "unknown";
}

std::optional<Rejection> RateLimiter::admit(const std::string& key_name, const KeyLimits& limits, int64_t tokens,
                                            double now) {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = states_.try_emplace(key_name);
    State& s = it->second;
    if (fresh) {
        s.limits = limits;
        if (limits.rpm > 0) s.requests = TokenBucket(double(limits.rpm), double(limits.rpm) / 60.0, now);
        if (limits.tpm > 0) s.tokens = TokenBucket(double(limits.tpm), double(limits.tpm) / 60.0, now);
    }
    if (limits.concurrency > 0 && s.in_flight >= limits.concurrency)
        // A seat frees when some request ends; one second is a reasonable hint to back off.
        return Rejection{RejectReason::concurrency, 1.0,
                         fmt::format("too many concurrent requests for this key (limit {})", limits.concurrency)};
    if (limits.tpm > 0 && double(tokens) > s.tokens.capacity())
        return Rejection{RejectReason::too_large, std::numeric_limits<double>::infinity(),
                         fmt::format("request too large: it reserves {} tokens (prompt + n * max_tokens) but the "
                                     "key's limit is {} tokens per minute; lower max_tokens",
                                     tokens, limits.tpm)};
    double wait_requests = limits.rpm > 0 ? s.requests.wait_for(1, now) : 0.0;
    if (wait_requests > 0)
        return Rejection{RejectReason::rpm, wait_requests,
                         fmt::format("rate limit reached: {} requests per minute", limits.rpm)};
    double wait_tokens = limits.tpm > 0 ? s.tokens.wait_for(double(tokens), now) : 0.0;
    if (wait_tokens > 0)
        return Rejection{RejectReason::tpm, wait_tokens,
                         fmt::format("rate limit reached: {} tokens per minute (this request reserves {})", limits.tpm,
                                     tokens)};
    if (limits.rpm > 0) s.requests.try_take(1, now);
    if (limits.tpm > 0) s.tokens.try_take(double(tokens), now);
    ++s.in_flight;
    return std::nullopt;
}

void RateLimiter::finish(const std::string& key_name, int64_t reserved_tokens, int64_t used_tokens, double now) {
    std::lock_guard lock(mutex_);
    auto it = states_.find(key_name);
    if (it == states_.end()) return;
    State& s = it->second;
    if (s.in_flight > 0) --s.in_flight;
    if (s.limits.tpm > 0) {
        if (used_tokens < reserved_tokens) s.tokens.give_back(double(reserved_tokens - used_tokens), now);
        else if (used_tokens > reserved_tokens) s.tokens.charge(double(used_tokens - reserved_tokens), now);
    }
}

int64_t RateLimiter::in_flight(const std::string& key_name) const {
    std::lock_guard lock(mutex_);
    auto it = states_.find(key_name);
    return it == states_.end() ? 0 : it->second.in_flight;
}

}  // namespace pagoda::server
