// Token-bucket arithmetic against hand-computed values on a fake clock.
#include <cmath>
#include <gtest/gtest.h>

#include "server/token_bucket.h"

using pagoda::server::TokenBucket;

TEST(TokenBucket, StartsFullAndRefillsLinearly) {
    TokenBucket b(60, 1.0, 100.0);  // 60 units, 1 per second
    EXPECT_DOUBLE_EQ(b.level(100.0), 60);
    EXPECT_TRUE(b.try_take(50, 100.0));
    EXPECT_DOUBLE_EQ(b.level(100.0), 10);
    EXPECT_DOUBLE_EQ(b.level(105.5), 15.5);
    EXPECT_DOUBLE_EQ(b.level(1000.0), 60);  // capped at capacity
}

TEST(TokenBucket, RefusedTakeCostsNothingAndReportsTheWait) {
    TokenBucket b(10, 2.0, 0.0);
    EXPECT_TRUE(b.try_take(8, 0.0));
    EXPECT_FALSE(b.try_take(5, 0.0));  // 2 left
    EXPECT_DOUBLE_EQ(b.level(0.0), 2);
    EXPECT_DOUBLE_EQ(b.wait_for(5, 0.0), 1.5);  // needs 3 more at 2/s
    EXPECT_FALSE(b.try_take(5, 1.49));
    EXPECT_TRUE(b.try_take(5, 1.5));
    EXPECT_NEAR(b.level(1.5), 0, 1e-12);
}

TEST(TokenBucket, MoreThanCapacityNeverFits) {
    TokenBucket b(10, 1.0, 0.0);
    EXPECT_TRUE(std::isinf(b.wait_for(11, 0.0)));
    EXPECT_TRUE(std::isinf(b.wait_for(11, 1e9)));
    EXPECT_DOUBLE_EQ(b.wait_for(10, 0.0), 0);
}

TEST(TokenBucket, GiveBackCapsAndChargeMakesDebt) {
    TokenBucket b(100, 10.0, 0.0);
    ASSERT_TRUE(b.try_take(100, 0.0));
    b.give_back(30, 0.0);  // reserved more than used
    EXPECT_DOUBLE_EQ(b.level(0.0), 30);
    b.give_back(500, 0.0);
    EXPECT_DOUBLE_EQ(b.level(0.0), 100);
    b.charge(150, 0.0);  // used more than reserved: debt
    EXPECT_DOUBLE_EQ(b.level(0.0), -50);
    EXPECT_DOUBLE_EQ(b.wait_for(10, 0.0), 6.0);  // (10 - -50) / 10
}

TEST(TokenBucket, ClockSteppingBackDoesNotRefillOrDrain) {
    TokenBucket b(10, 1.0, 50.0);
    ASSERT_TRUE(b.try_take(10, 50.0));
    EXPECT_DOUBLE_EQ(b.level(40.0), 0);
    EXPECT_DOUBLE_EQ(b.level(52.0), 2);
}
