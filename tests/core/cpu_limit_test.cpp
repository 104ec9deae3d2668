// The CPU limit a container sets (cgroup v2 cpu.max, v1 quota/period) read as whole CPUs, and
// default_thread_count() capped by it and by the affinity mask.
#include "core/cpu_limit.h"

#include <gtest/gtest.h>

#include "core/thread_pool.h"

namespace pagoda {
namespace {

TEST(CpuLimit, CgroupV2CpuMaxInWholeCpus) {
    EXPECT_EQ(cgroup_v2_cpu_limit("400000 100000\n"), 4);
    EXPECT_EQ(cgroup_v2_cpu_limit("200000 100000"), 2);
    EXPECT_EQ(cgroup_v2_cpu_limit("150000 100000"), 1);  // 1.5 CPUs: one thread, none throttled
    EXPECT_EQ(cgroup_v2_cpu_limit("50000 100000"), 1);   // under one CPU: still one thread
    EXPECT_EQ(cgroup_v2_cpu_limit("max 100000\n"), 0);   // no limit
}

TEST(CpuLimit, CgroupV2UnreadableTextIsNoLimit) {
    for (const char* text : {"", "\n", "400000", "abc 100000", "400000 abc", "400000 0", "-5 100000", "400000 100000 7"})
        EXPECT_EQ(cgroup_v2_cpu_limit(text), 0) << text;
}

TEST(CpuLimit, CgroupV1QuotaAndPeriod) {
    EXPECT_EQ(cgroup_v1_cpu_limit(-1, 100000), 0);
    EXPECT_EQ(cgroup_v1_cpu_limit(300000, 100000), 3);
    EXPECT_EQ(cgroup_v1_cpu_limit(250000, 100000), 2);
    EXPECT_EQ(cgroup_v1_cpu_limit(20000, 100000), 1);
    EXPECT_EQ(cgroup_v1_cpu_limit(100000, 0), 0);
}

TEST(CpuLimit, DefaultThreadCountStaysWithinWhatThisProcessMayUse) {
    const int n = default_thread_count();
    EXPECT_GE(n, 1);
    if (const int affinity = affinity_cpu_count(); affinity > 0) EXPECT_LE(n, affinity);
    if (const int limit = cgroup_cpu_limit(); limit > 0) EXPECT_LE(n, limit);
}

}  // namespace
}  // namespace pagoda
