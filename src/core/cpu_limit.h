// How many CPUs this process may actually use, beyond what the machine has: its affinity mask
// (taskset, a cpuset) and its cgroup's CPU bandwidth limit (a container's CPU limit: cgroup v2
// cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us). Compute threads past that limit only get
// throttled, and a throttled thread stalls every parallel region it takes part in.
#pragma once
#include <string_view>

namespace pagoda {

// Whole CPUs a cgroup v2 cpu.max text allows ("400000 100000" -> 4, "150000 100000" -> 1: the
// fraction is left idle rather than throttled); 0 for no limit ("max 100000") or an unreadable text.
int cgroup_v2_cpu_limit(std::string_view cpu_max);
// The same for cgroup v1: quota -1 (no limit) or a bad period -> 0.
int cgroup_v1_cpu_limit(long long quota_us, long long period_us);

// This process's limit from /sys/fs/cgroup (v2, else v1); 0 when there is none.
int cgroup_cpu_limit();
// CPUs in this process's affinity mask; 0 when it cannot be read.
int affinity_cpu_count();

}  // namespace pagoda
