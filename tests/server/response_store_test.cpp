// The Responses store's bounds as invariants: never more than max_entries live, the oldest go
// first, nothing outlives its TTL, replacing an id does not duplicate it, erase and misses are exact.
#include "server/response_store.h"

#include <gtest/gtest.h>
#include <random>

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

StoredResponse entry(int n) { return {json{{"n", n}}, json::array({n})}; }

}  // namespace

TEST(ResponseStore, KeepsTheNewestUpToTheCap) {
    ResponseStore store(3, 100);
    for (int i = 0; i < 10; ++i) {
        store.put("r" + std::to_string(i), entry(i), 0);
        EXPECT_LE(store.size(0), 3u);
        // The newest min(i+1, 3) are there, in full; everything older is gone.
        for (int j = 0; j <= i; ++j) {
            auto got = store.get("r" + std::to_string(j), 0);
            if (j > i - 3) {
                ASSERT_NE(got, nullptr) << j;
                EXPECT_EQ(got->response["n"], j);
                EXPECT_EQ(got->items, json::array({j}));
            } else {
                EXPECT_EQ(got, nullptr) << j << " should have been evicted";
            }
        }
    }
}

TEST(ResponseStore, EntriesExpireAfterTheirTtl) {
    ResponseStore store(100, 10);
    store.put("a", entry(1), 0);
    store.put("b", entry(2), 5);
    EXPECT_NE(store.get("a", 9.99), nullptr);
    EXPECT_EQ(store.get("a", 10), nullptr);  // lived exactly its TTL
    EXPECT_NE(store.get("b", 14.99), nullptr);
    EXPECT_EQ(store.size(15), 0u);
    EXPECT_EQ(store.get("b", 15), nullptr);
}

TEST(ResponseStore, ReplacingAnIdRenewsItAndEraseRemovesIt) {
    ResponseStore store(2, 10);
    store.put("a", entry(1), 0);
    store.put("b", entry(2), 1);
    store.put("a", entry(3), 2);  // a is now the newest: c evicts b, not a
    store.put("c", entry(4), 3);
    EXPECT_EQ(store.size(3), 2u);
    EXPECT_EQ(store.get("b", 3), nullptr);
    ASSERT_NE(store.get("a", 3), nullptr);
    EXPECT_EQ(store.get("a", 3)->response["n"], 3);
    EXPECT_NE(store.get("a", 11.5), nullptr);  // replaced at 2: its TTL runs from then, to 12
    EXPECT_TRUE(store.erase("c", 3));
    EXPECT_FALSE(store.erase("c", 3));
    EXPECT_FALSE(store.erase("never", 3));
    EXPECT_EQ(store.get("c", 3), nullptr);
}

TEST(ResponseStore, ACapOfZeroStoresNothing) {
    ResponseStore store(0, 10);
    store.put("a", entry(1), 0);
    EXPECT_EQ(store.get("a", 0), nullptr);
    EXPECT_EQ(store.size(0), 0u);
}

// Random puts, gets and erases against a model of the rules.
TEST(ResponseStore, RandomOperationsMatchTheRules) {
    std::mt19937 rng(7);
    const size_t cap = 5;
    const double ttl = 20;
    ResponseStore store(cap, ttl);
    struct Live {
        std::string id;
        double put_at;
    };
    std::vector<Live> model;  // oldest first
    double now = 0;
    for (int step = 0; step < 3000; ++step) {
        now += std::uniform_real_distribution<double>(0, 2)(rng);
        std::erase_if(model, [&](const Live& l) { return l.put_at + ttl <= now; });
        const std::string id = "r" + std::to_string(rng() % 12);
        switch (rng() % 3) {
            case 0: {
                store.put(id, entry(step), now);
                std::erase_if(model, [&](const Live& l) { return l.id == id; });
                model.push_back({id, now});
                while (model.size() > cap) model.erase(model.begin());
                break;
            }
            case 1: {
                const bool live = std::any_of(model.begin(), model.end(), [&](const Live& l) { return l.id == id; });
                EXPECT_EQ(store.get(id, now) != nullptr, live) << "step " << step;
                break;
            }
            default: {
                const bool live = std::any_of(model.begin(), model.end(), [&](const Live& l) { return l.id == id; });
                EXPECT_EQ(store.erase(id, now), live) << "step " << step;
                std::erase_if(model, [&](const Live& l) { return l.id == id; });
            }
        }
        ASSERT_EQ(store.size(now), model.size()) << "step " << step;
        ASSERT_LE(store.size(now), cap);
    }
}
