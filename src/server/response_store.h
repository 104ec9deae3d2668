// The bounded in-memory store behind the Responses API's `store` and `previous_response_id`: each
// stored response keeps its whole conversation (every input item it was given, those of the
// responses it continued included, then its own output items), so a follow-up continues it without
// the client resending anything. Bounded two ways: an entry lives `ttl_seconds` after it was put,
// and at most `max_entries` live at once (the oldest go first). As every entry has the same TTL,
// insertion order is also expiry order: one list, pruned from the front. Nothing survives a restart.
// Thread-safe (one mutex); entries are shared immutable snapshots, so a reader never copies one.
#pragma once
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace pagoda::server {

struct StoredResponse {
    nlohmann::json response;  // the response object as the client received it
    nlohmann::json items;     // the conversation: input items then output items (Responses item shape)
};

class ResponseStore {
public:
    // max_entries 0 stores nothing (every get misses); ttl_seconds must be > 0.
    ResponseStore(size_t max_entries, double ttl_seconds);

    // Stores (or replaces) `id` at time `now` (seconds on any monotonic clock), then prunes.
    void put(const std::string& id, StoredResponse entry, double now);
    // The entry, or null when it was never stored, expired, was evicted or deleted.
    std::shared_ptr<const StoredResponse> get(const std::string& id, double now);
    // Removes `id`; false when it was not there (or had expired).
    bool erase(const std::string& id, double now);
    size_t size(double now);

    size_t max_entries() const { return max_entries_; }
    double ttl_seconds() const { return ttl_; }

private:
    struct Slot {
        std::string id;
        double expires;
        std::shared_ptr<const StoredResponse> entry;
    };
    void prune(double now);  // mutex held

    const size_t max_entries_;
    const double ttl_;
    std::mutex mutex_;
    std::list<Slot> order_;  // oldest first
    std::unordered_map<std::string, std::list<Slot>::iterator> index_;
};

}  // namespace pagoda::server
