#include "tune/machine_identity.h"

#include <cpuid.h>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace pagoda::tune {

namespace {

std::string trim(std::string s) {
    const auto b = s.find_first_not_of(' ');
    if (b == std::string::npos) return {};
    const auto e = s.find_last_not_of(' ');
    s = s.substr(b, e - b + 1);
    // Collapse runs of spaces (some brand strings pad inside).
    std::string out;
    for (char c : s)
        if (c != ' ' || out.empty() || out.back() != ' ') out += c;
    return out;
}

std::string brand_string() {
    unsigned a, b, c, d;
    if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000004u) return "unknown";
    char text[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
        __cpuid(0x80000002u + leaf, a, b, c, d);
        const unsigned regs[4] = {a, b, c, d};
        std::memcpy(text + 16 * leaf, regs, 16);
    }
    return trim(text);
}

}  // namespace

MachineIdentity current_machine() {
    MachineIdentity m;
    m.cpu_model = brand_string();
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid(0, a, b, c, d);
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    m.vendor = vendor;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        const int base_family = int((a >> 8) & 0xf), base_model = int((a >> 4) & 0xf);
        m.family = base_family == 0xf ? base_family + int((a >> 20) & 0xff) : base_family;
        m.model = base_family == 0x6 || base_family == 0xf ? base_model | int(((a >> 16) & 0xf) << 4) : base_model;
        m.stepping = int(a & 0xf);
    }
    // The flags pagoda's kernels depend on (cpu_features: OS-enabled), plus the AMX and FP16 bits
    // from CPUID leaf 7 that the next kernels will use: a profile from a CPU with them is not valid here.
    const CpuFeatures& f = cpu_features();
    auto add = [&](bool present, const char* name) {
        if (present) m.isa_flags.emplace_back(name);
    };
    add(f.avx2, "avx2");
    add(f.fma, "fma");
    add(f.f16c, "f16c");
    add(f.avx512f, "avx512f");
    add(f.avx512bw, "avx512bw");
    add(f.avx512vl, "avx512vl");
    add(f.avx512dq, "avx512dq");
    add(f.avx512vnni, "avx512_vnni");
    add(f.avx512bf16, "avx512_bf16");
    add(f.avxvnni, "avx_vnni");
    if (__get_cpuid_max(0, nullptr) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        add(d & (1u << 23), "avx512_fp16");
        add(d & (1u << 22), "amx_bf16");
        add(d & (1u << 24), "amx_tile");
        add(d & (1u << 25), "amx_int8");
    }
    std::sort(m.isa_flags.begin(), m.isa_flags.end());
    m.cores = default_thread_count();
    return m;
}

std::vector<std::string> differences(const MachineIdentity& p, const MachineIdentity& h) {
    std::vector<std::string> out;
    auto field = [&](const char* name, const std::string& a, const std::string& b) {
        if (a != b) out.push_back(fmt::format("{}: '{}' in the profile, '{}' here", name, a, b));
    };
    field("cpu_model", p.cpu_model, h.cpu_model);
    field("vendor", p.vendor, h.vendor);
    field("family", std::to_string(p.family), std::to_string(h.family));
    field("model", std::to_string(p.model), std::to_string(h.model));
    field("cores", std::to_string(p.cores), std::to_string(h.cores));
    std::vector<std::string> only_p, only_h;
    std::set_difference(p.isa_flags.begin(), p.isa_flags.end(), h.isa_flags.begin(), h.isa_flags.end(),
                        std::back_inserter(only_p));
    std::set_difference(h.isa_flags.begin(), h.isa_flags.end(), p.isa_flags.begin(), p.isa_flags.end(),
                        std::back_inserter(only_h));
    if (!only_p.empty() || !only_h.empty())
        out.push_back(fmt::format("isa_flags: the profile's CPU has [{}] that this one lacks, this one has [{}] it lacked",
                                  fmt::join(only_p, ", "), fmt::join(only_h, ", ")));
    return out;
}

}  // namespace pagoda::tune
