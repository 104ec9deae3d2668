// RollingQuantiles and RollingSums: quantiles within the bucket error of the exact nearest rank,
// slices expiring as time moves past the window, per-slice series, sums over recent spans.
#include "server/rolling_window.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <random>

namespace pagoda::server {
namespace {

constexpr double kQs[] = {0.5, 0.9, 0.99};

double exact_quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const size_t rank = size_t(std::max(1.0, std::ceil(q * double(v.size()))));
    return v[rank - 1];
}

TEST(RollingQuantiles, EmptyWindowHasNoQuantiles) {
    RollingQuantiles q({5, 12});
    const auto s = q.summary(100, kQs);
    EXPECT_EQ(s.count, 0);
    EXPECT_TRUE(s.quantiles.empty());
    const auto series = q.series(100, kQs);
    ASSERT_EQ(series.size(), 12u);
    EXPECT_DOUBLE_EQ(series.back().start, 100);  // the current slice starts at floor(100 / 5) * 5
    EXPECT_DOUBLE_EQ(series.front().start, 45);
    for (const auto& p : series) EXPECT_EQ(p.summary.count, 0);
}

TEST(RollingQuantiles, QuantilesWithinTwoPercentOfExact) {
    RollingQuantiles q({5, 60});
    std::mt19937 rng(7);
    std::lognormal_distribution<double> dist(std::log(0.02), 1.0);  // latencies around 20 ms
    std::vector<double> values;
    for (int i = 0; i < 5000; ++i) {
        const double v = dist(rng);
        values.push_back(v);
        q.add(v, 10.0 + i * 0.05);  // spread over 250 s of the 300 s window
    }
    const auto s = q.summary(270, kQs);
    ASSERT_EQ(s.count, 5000);
    ASSERT_EQ(s.quantiles.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        const double exact = exact_quantile(values, kQs[i]);
        EXPECT_NEAR(s.quantiles[i], exact, exact * 0.021) << "q=" << kQs[i];
    }
    EXPECT_DOUBLE_EQ(s.min, *std::min_element(values.begin(), values.end()));
    EXPECT_DOUBLE_EQ(s.max, *std::max_element(values.begin(), values.end()));
}

TEST(RollingQuantiles, ExtremesAreExact) {
    RollingQuantiles q({1, 10});
    for (double v : {0.003, 0.5, 0.007}) q.add(v, 3.2);
    const double qs[] = {0.0, 1.0};
    const auto s = q.summary(3.9, qs);
    EXPECT_DOUBLE_EQ(s.quantiles[0], 0.003);
    EXPECT_DOUBLE_EQ(s.quantiles[1], 0.5);
    const double median[] = {0.5};
    EXPECT_NEAR(q.summary(3.9, median).quantiles[0], 0.007, 0.007 * 0.021);  // rank 2 of 3
}

TEST(RollingQuantiles, OldSlicesLeaveTheWindow) {
    RollingQuantiles q({5, 4});  // 20 s window
    q.add(1.0, 0.5);             // slice 0
    q.add(0.010, 12.0);          // slice 2
    EXPECT_EQ(q.summary(19.9, kQs).count, 2);
    const auto s = q.summary(20.1, kQs);  // slice 0 is now older than the window
    EXPECT_EQ(s.count, 1);
    EXPECT_DOUBLE_EQ(s.quantiles[2], 0.010);
    // Reusing the ring slot of slice 0 for slice 4 starts it empty.
    q.add(0.020, 21.0);
    EXPECT_EQ(q.summary(21.0, kQs).count, 2);
    EXPECT_DOUBLE_EQ(q.summary(21.0, kQs).max, 0.020);
    EXPECT_EQ(q.summary(40.0, kQs).count, 0);  // everything expired
}

TEST(RollingQuantiles, RecentSpanAndSeriesPerSlice) {
    RollingQuantiles q({5, 6});
    for (int i = 0; i < 10; ++i) q.add(0.100, 2.0);  // slice 0
    q.add(0.001, 27.0);                              // slice 5 (current at t = 28)
    EXPECT_EQ(q.summary(28, kQs).count, 11);
    EXPECT_EQ(q.summary(28, kQs, 5).count, 1);  // only the slices that end after t = 23
    const auto series = q.series(28, kQs);
    ASSERT_EQ(series.size(), 6u);
    EXPECT_EQ(series[0].summary.count, 10);
    EXPECT_DOUBLE_EQ(series[0].summary.quantiles[0], 0.100);
    for (int i = 1; i < 5; ++i) EXPECT_EQ(series[size_t(i)].summary.count, 0);
    EXPECT_EQ(series[5].summary.count, 1);
    EXPECT_DOUBLE_EQ(series[5].start, 25);
}

TEST(RollingQuantiles, IgnoresInvalidValues) {
    RollingQuantiles q({1, 4});
    q.add(-1, 0.5);
    q.add(NAN, 0.5);
    q.add(INFINITY, 0.5);
    EXPECT_EQ(q.summary(0.5, kQs).count, 0);
    q.add(0, 0.5);  // zero is a value (an instant token gap)
    EXPECT_EQ(q.summary(0.5, kQs).count, 1);
}

TEST(RollingQuantiles, BucketsBoundTheRelativeError) {
    for (double v = 2e-6; v < 1e3; v *= 1.37) {
        const double mid = RollingQuantiles::bucket_value(RollingQuantiles::bucket_of(v));
        EXPECT_NEAR(mid, v, v * 0.0201) << v;
    }
}

TEST(RollingSums, SumsSeriesAndExpiry) {
    RollingSums s({5, 4}, 2);
    s.add(0, 10, 1);
    s.add(0, 5, 7);
    s.add(1, 3, 7);
    s.add(2, 99, 7);  // no such channel: ignored
    EXPECT_DOUBLE_EQ(s.sum(0, 9), 15);
    EXPECT_DOUBLE_EQ(s.sum(1, 9), 3);
    EXPECT_DOUBLE_EQ(s.sum(0, 9, 4), 5);  // slices ending after t = 5: only slice 1
    const auto series = s.series(9);
    ASSERT_EQ(series.size(), 4u);
    EXPECT_DOUBLE_EQ(series[2].sums[0], 10);
    EXPECT_DOUBLE_EQ(series[3].sums[0], 5);
    EXPECT_DOUBLE_EQ(series[3].sums[1], 3);
    EXPECT_DOUBLE_EQ(s.sum(0, 21), 5);   // slice 0 expired
    EXPECT_DOUBLE_EQ(s.sum(0, 100), 0);  // all expired
}

}  // namespace
}  // namespace pagoda::server
