#include "core/cpu_steal.h"

#include <gtest/gtest.h>

#include <fstream>

namespace pagoda {
namespace {

TEST(CpuSteal, TheAggregateLineSumsItsFirstEightFieldsAndTakesTheEighthAsSteal) {
    // Per-CPU lines before it are skipped; guest and guest_nice (fields 9, 10) are already in user.
    const auto t = parse_proc_stat(
        "cpu0 1 1 1 1 1 1 1 1 0 0\n"
        "cpu  10904479 810351 1055675 2401167 20424 0 22780 270115 500 7\n"
        "intr 1 2 3\n");
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->total, 10904479u + 810351u + 1055675u + 2401167u + 20424u + 0u + 22780u + 270115u);
    EXPECT_EQ(t->steal, 270115u);
}

TEST(CpuSteal, AKernelWithoutTheStealFieldReportsNone) {
    const auto t = parse_proc_stat("cpu  100 0 50 850 0 0 0\n");
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->total, 1000u);
    EXPECT_EQ(t->steal, 0u);
}

TEST(CpuSteal, MalformedTextsAreRefused) {
    EXPECT_FALSE(parse_proc_stat(""));
    EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n"));           // no aggregate line
    EXPECT_FALSE(parse_proc_stat("cpu  1 2 3\n"));                     // fewer than four fields
    EXPECT_FALSE(parse_proc_stat("cpu  1 2 x 4 5 6 7 8\n"));           // not a number
    EXPECT_FALSE(parse_proc_stat("cpu  1 2 -3 4 5 6 7 8\n"));          // negative
    EXPECT_FALSE(parse_proc_stat("cpu  1 2 3 4 5 6 7 8q\n"));          // trailing junk
    EXPECT_FALSE(parse_proc_stat("cpu  18446744073709551615 1 0 0\n"));  // the sum overflows
    EXPECT_FALSE(parse_proc_stat("cpu  99999999999999999999 0 0 0\n"));  // beyond 64 bits
}

TEST(CpuSteal, TheMeterAddsTheTicksOfEveryIntervalAndOnlyThose) {
    if (!std::ifstream("/proc/stat")) GTEST_SKIP() << "no /proc/stat on this system";
    StealMeter m;
    EXPECT_FALSE(m.known());
    EXPECT_EQ(m.share(), 0.0);
    m.end();  // an end without a begin adds nothing
    EXPECT_FALSE(m.known());
    for (int i = 0; i < 2; ++i) {
        m.begin();
        volatile double x = 0;
        for (int k = 0; k < 20000000; ++k) x = x + 1.0;  // a few tens of ms: some ticks pass
        m.end();
    }
    EXPECT_TRUE(m.known());
    EXPECT_GE(m.share(), 0.0);
    EXPECT_LE(m.share(), 1.0);
    const auto now = read_cpu_ticks();
    ASSERT_TRUE(now.has_value());
    EXPECT_GT(now->total, 0u);
    EXPECT_LE(now->steal, now->total);
}

}  // namespace
}  // namespace pagoda
