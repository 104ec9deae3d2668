// API keys for the gateway, read from --api-key-file. One key per line, then optional settings:
//     sk-alice-123  name=alice rpm=60 tpm=10000 concurrency=4
//     # comments start with '#' (whole line, or after the settings)
// name: the label used in logs and metrics (never the key itself); default "key<N>" (N = line).
// rpm / tpm: requests and tokens (prompt + max_tokens reserved) per minute; concurrency: requests
// in flight. 0 or absent: unlimited. weight: the key's share under the fair scheduling policy
// (a positive number, default 1); priority: the best (lowest) request `priority` the key may claim
// (default 0, so only the key file can grant a class above normal); timeout: the default start
// deadline of the key's requests in seconds (a request's own `timeout` overrides it); admin=true: the
// key may also call the /admin endpoints (model reloads). Errors name the file, line and problem. Lookup compares the
// presented key against every key in constant time, so timing reveals nothing about near misses.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::server {

struct KeyLimits {
    int64_t rpm = 0, tpm = 0, concurrency = 0;  // 0: unlimited
};

struct ApiKey {
    std::string key;
    std::string name;
    KeyLimits limits;
    uint32_t tenant = 0;        // the engine's fair-share tenant: 1 + the key's index in the file
    double weight = 1;          // fair share weight (> 0)
    int32_t best_priority = 0;  // requests may ask for priority >= this
    double start_timeout = 0;   // default `timeout` of its requests, seconds (0: none)
    bool admin = false;         // may call /admin/... (admin=true in the key file, or --admin-key)
};

class ApiKeyTable {
public:
    ApiKeyTable() = default;  // empty: the server is open
    static ApiKeyTable parse(std::string_view text, const std::string& source = "api key file");
    static ApiKeyTable load(const std::string& path);

    bool empty() const { return keys_.empty(); }
    size_t size() const { return keys_.size(); }
    const std::vector<ApiKey>& keys() const { return keys_; }
    // The key matching `presented`, or nullptr. Time depends only on the table, not on the match.
    const ApiKey* find(std::string_view presented) const;

private:
    std::vector<ApiKey> keys_;
};

// True when a and b are equal; time depends on the lengths only, not on where they differ.
bool constant_time_equal(std::string_view a, std::string_view b);

// "Bearer KEY" -> "KEY" (scheme case-insensitive); empty when the header has another form.
std::string_view bearer_token(std::string_view authorization);

}  // namespace pagoda::server
