// Per-key admission: requests per minute and tokens per minute (token buckets refilled
// continuously, one minute's worth of burst) and requests in flight. admit() checks all three and
// takes from none unless all pass, so a refusal costs the caller nothing. Token use is reserved up
// front (prompt + n * max_tokens) and corrected by finish() with what the request really used.
// Thread-safe. Time comes in as seconds on a monotonic clock (testable with a fake clock).
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "server/api_keys.h"
#include "server/token_bucket.h"

namespace pagoda::server {

enum class RejectReason { rpm, tpm, concurrency, too_large };
const char* reject_reason_name(RejectReason r);  // "rpm", "tpm", "concurrency", "too_large"

struct Rejection {
    RejectReason reason;
    double retry_after = 0;  // seconds; infinite for too_large (never fits the bucket)
    std::string message;
};

class RateLimiter {
public:
    // The key's state is created on first use from its limits.
    std::optional<Rejection> admit(const std::string& key_name, const KeyLimits& limits, int64_t tokens, double now);
    // The request ended: frees its concurrency seat and settles reserved vs used tokens.
    void finish(const std::string& key_name, int64_t reserved_tokens, int64_t used_tokens, double now);
    int64_t in_flight(const std::string& key_name) const;

private:
    struct State {
        TokenBucket requests, tokens;
        int64_t in_flight = 0;
        KeyLimits limits;
    };
    mutable std::mutex mutex_;
    std::map<std::string, State> states_;
};

}  // namespace pagoda::server
