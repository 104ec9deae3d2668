#include "core/cpu_limit.h"

#include <sched.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace pagoda {

int cgroup_v1_cpu_limit(long long quota_us, long long period_us) {
    if (quota_us <= 0 || period_us <= 0) return 0;
    const long long cpus = quota_us / period_us;
    return cpus < 1 ? 1 : int(cpus);
}

int cgroup_v2_cpu_limit(std::string_view cpu_max) {
    while (!cpu_max.empty() && (cpu_max.back() == '\n' || cpu_max.back() == ' ')) cpu_max.remove_suffix(1);
    const size_t space = cpu_max.find(' ');
    if (space == std::string_view::npos) return 0;
    const std::string_view quota = cpu_max.substr(0, space), period = cpu_max.substr(space + 1);
    if (quota == "max") return 0;
    long long q = 0, p = 0;
    auto parse = [](std::string_view s, long long& v) {
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        return ec == std::errc() && end == s.data() + s.size();
    };
    if (!parse(quota, q) || !parse(period, p)) return 0;
    return cgroup_v1_cpu_limit(q, p);
}

int cgroup_cpu_limit() {
    if (std::ifstream v2("/sys/fs/cgroup/cpu.max"); v2) {
        std::stringstream text;
        text << v2.rdbuf();
        return cgroup_v2_cpu_limit(text.str());
    }
    for (const char* dir : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
        std::ifstream quota(std::string(dir) + "/cpu.cfs_quota_us"), period(std::string(dir) + "/cpu.cfs_period_us");
        long long q = 0, p = 0;
        if (quota >> q && period >> p) return cgroup_v1_cpu_limit(q, p);
    }
    return 0;
}

int affinity_cpu_count() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    return CPU_COUNT(&set);
}

}  // namespace pagoda
