// The machine a profile was measured on: the CPU's name, vendor / family / model / stepping (CPUID),
// the ISA flags whose presence changes which kernel pagoda can run, and the cores pagoda would use
// (default_thread_count: physical cores within the affinity mask and cgroup limit). A profile's
// kernel choices and timings hold for that machine only; differences() says what is not the same.
#pragma once
#include <string>
#include <vector>

namespace pagoda::tune {

struct MachineIdentity {
    std::string cpu_model;  // the CPUID brand string, trimmed ("Intel(R) Xeon(R) Processor @ 2.80GHz")
    std::string vendor;     // "GenuineIntel", "AuthenticAMD", ...
    int family = 0, model = 0, stepping = 0;
    std::vector<std::string> isa_flags;  // sorted names of the flags present (avx2, avx512_vnni, amx_int8, ...)
    int cores = 0;
};

MachineIdentity current_machine();

// One phrase per differing field, naming it and both values ("cpu_model: 'A' in the profile, 'B'
// here"; flags as the ones only one side has); empty when the machines match.
std::vector<std::string> differences(const MachineIdentity& profile, const MachineIdentity& here);

}  // namespace pagoda::tune
