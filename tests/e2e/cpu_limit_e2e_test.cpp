// The binary's default thread count respects the affinity mask it starts with (as a container's
// cpuset or `taskset` sets it): `pagoda cpu-info` run pinned to one CPU defaults to one thread.
#include <sched.h>

#include <gtest/gtest.h>

#include "e2e/process.h"

namespace pagoda::test {
namespace {

TEST(CpuLimitE2E, DefaultThreadsFollowTheAffinityMask) {
    cpu_set_t saved;
    ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
    if (CPU_COUNT(&saved) < 2) GTEST_SKIP() << "needs two CPUs to pin to one";
    int first = 0;
    while (!CPU_ISSET(first, &saved)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // the forked child inherits it
    ProcessResult r = run_pagoda({"cpu-info"});
    ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("default threads: 1\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pagoda::test
