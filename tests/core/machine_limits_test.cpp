// Machine-limit measurements: plausible, positive figures from each, and the region form reading
// exactly the memory it is given (empty and unaligned regions included).
#include <gtest/gtest.h>

#include <vector>

#include "core/cpu_features.h"
#include "core/machine_limits.h"
#include "core/thread_pool.h"

namespace pagoda {
namespace {

TEST(MachineLimits, BandwidthOfGivenRegionsAndOfAFreshBuffer) {
    ThreadPool pool(2);
    std::vector<uint8_t> a(size_t(8) << 20, 1), b(size_t(3) << 20, 2);
    const std::vector<std::span<const uint8_t>> regions = {std::span<const uint8_t>(a).subspan(7),  // unaligned start
                                                           std::span<const uint8_t>(b), std::span<const uint8_t>()};
    const double regions_gbps = measure_read_bandwidth(pool, regions);
    EXPECT_GT(regions_gbps, 0.1);
    EXPECT_LT(regions_gbps, 10000.0);  // 11 MiB in well under a second, but not absurdly fast
    EXPECT_EQ(measure_read_bandwidth(pool, std::vector<std::span<const uint8_t>>{}), 0.0);
    EXPECT_EQ(measure_read_bandwidth(pool, std::vector<std::span<const uint8_t>>{std::span<const uint8_t>(a).first(100)}), 0.0);
    EXPECT_GT(measure_read_bandwidth(pool, size_t(64) << 20), 0.1);
}

TEST(MachineLimits, PeaksArePositiveWhereThePathExists) {
    ThreadPool pool(2);
    if (active_isa() == Isa::scalar) GTEST_SKIP() << "scalar path: no vector peak";
    EXPECT_GT(measure_fp32_fma_peak(pool), 1.0);
    // Every vector path has an int8 dot: vpdpbusd with VNNI, else the AVX2 vpmaddubsw sequence.
    EXPECT_GT(measure_int8_dot_peak(pool), 1.0);
    if (active_isa() == Isa::avx512 && cpu_features().avx512bf16) {
        EXPECT_GT(measure_bf16_dot_peak(pool), 1.0);
    }
}

}  // namespace
}  // namespace pagoda
