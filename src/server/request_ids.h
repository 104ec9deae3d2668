// Request and response ids: unique within the process and unlikely to repeat across restarts — a
// random salt drawn at construction plus a counter, mixed (splitmix64's finaliser) into 16 hex
// digits. Thread-safe. The gateway of each model and the several-model router each keep one.
#pragma once
#include <atomic>
#include <cstdint>
#include <random>
#include <string>

#include <fmt/format.h>

namespace pagoda::server {

class RequestIds {
public:
    RequestIds() {
        std::random_device rd;
        salt_ = (uint64_t(rd()) << 32) ^ rd();
    }
    std::string next() {
        uint64_t x = salt_ + 0x9e3779b97f4a7c15ull * counter_.fetch_add(1);
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        return fmt::format("{:016x}", x);
    }

private:
    std::atomic<uint64_t> counter_{1};
    uint64_t salt_ = 0;
};

}  // namespace pagoda::server
