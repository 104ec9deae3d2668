// CPU time a hypervisor gave to other guests while this machine wanted it ("steal" in /proc/stat).
// Inside a virtual machine a benchmark cannot see the host's other tenants except through this
// counter: a run during which a quarter of the CPU time was stolen is slower for a reason no kernel
// change explains, so `bench` and `tune` report it beside their figures.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace pagoda {

// The aggregate "cpu" line of /proc/stat, in USER_HZ ticks summed over all CPUs.
struct CpuTicks {
    uint64_t total = 0;  // every field: user nice system idle iowait irq softirq steal (guest time is in user)
    uint64_t steal = 0;
};

// Parses a /proc/stat text; nullopt when it has no well-formed "cpu " line. A kernel too old to
// report steal (fewer than 8 fields) gives steal = 0.
std::optional<CpuTicks> parse_proc_stat(std::string_view text);
// This machine's counters now; nullopt where /proc/stat cannot be read (not Linux).
std::optional<CpuTicks> read_cpu_ticks();

// Accumulates the ticks that pass between begin() and end(), over any number of such intervals
// (a benchmark's timed repetitions). share() = stolen / all ticks, 0 when none passed or the
// counters are unavailable; known() says whether they were.
class StealMeter {
public:
    void begin();
    void end();
    bool known() const { return known_; }
    double share() const { return total_ > 0 ? double(steal_) / double(total_) : 0.0; }

private:
    std::optional<CpuTicks> start_;
    uint64_t total_ = 0, steal_ = 0;
    bool known_ = false;
};

}  // namespace pagoda
