// Per-key admission: rpm, tpm, concurrency and settlement, on a fake clock.
#include <cmath>
#include <gtest/gtest.h>

#include "server/rate_limiter.h"

using namespace pagoda::server;

TEST(RateLimiter, RequestsPerMinute) {
    RateLimiter rl;
    KeyLimits lim{.rpm = 3};
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(rl.admit("a", lim, 10, 0.0)) << i;
    auto r = rl.admit("a", lim, 10, 0.0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->reason, RejectReason::rpm);
    EXPECT_DOUBLE_EQ(r->retry_after, 20.0);  // one request refills every 60/3 s
    EXPECT_TRUE(rl.admit("a", lim, 10, 19.9));
    EXPECT_FALSE(rl.admit("a", lim, 10, 20.0));
    EXPECT_FALSE(rl.admit("other", lim, 10, 0.0)) << "keys are independent";
}

TEST(RateLimiter, TokensPerMinuteWithSettlement) {
    RateLimiter rl;
    KeyLimits lim{.tpm = 600};  // 10 tokens per second
    EXPECT_FALSE(rl.admit("k", lim, 500, 0.0));
    auto r = rl.admit("k", lim, 200, 0.0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->reason, RejectReason::tpm);
    EXPECT_DOUBLE_EQ(r->retry_after, 10.0);  // 100 left, 200 needed
    rl.finish("k", 500, 120, 0.0);  // used 120 of the 500 reserved: 380 back
    EXPECT_FALSE(rl.admit("k", lim, 480, 0.0));
}

TEST(RateLimiter, TooLargeForTheBucketIsNeverAdmitted) {
    RateLimiter rl;
    auto r = rl.admit("k", KeyLimits{.tpm = 100}, 101, 0.0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->reason, RejectReason::too_large);
    EXPECT_TRUE(std::isinf(r->retry_after));
}

TEST(RateLimiter, ConcurrencySeatsAndRefusalsTakeNothing) {
    RateLimiter rl;
    KeyLimits lim{.rpm = 10, .concurrency = 2};
    EXPECT_FALSE(rl.admit("k", lim, 1, 0.0));
    EXPECT_FALSE(rl.admit("k", lim, 1, 0.0));
    auto r = rl.admit("k", lim, 1, 0.0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->reason, RejectReason::concurrency);
    EXPECT_EQ(rl.in_flight("k"), 2);
    rl.finish("k", 1, 1, 0.0);
    EXPECT_EQ(rl.in_flight("k"), 1);
    // The refused request took no rpm token: 8 more fit in the same instant (10 - 2).
    for (int i = 0; i < 7; ++i) {
        EXPECT_FALSE(rl.admit("k", lim, 1, 0.0)) << i;
        rl.finish("k", 1, 1, 0.0);
    }
    EXPECT_FALSE(rl.admit("k", lim, 1, 0.0));
    rl.finish("k", 1, 1, 0.0);
    auto over = rl.admit("k", lim, 1, 0.0);
    ASSERT_TRUE(over);
    EXPECT_EQ(over->reason, RejectReason::rpm);
}

TEST(RateLimiter, UnlimitedKeyAlwaysAdmitted) {
    RateLimiter rl;
    for (int i = 0; i < 1000; ++i) EXPECT_FALSE(rl.admit("free", KeyLimits{}, 1000000, 0.0));
}
