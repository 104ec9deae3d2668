#include "core/cpu_features.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cpuid.h>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace pagoda {
namespace {

uint64_t read_xcr0() {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
    CpuFeatures f;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool osxsave = c & (1u << 27);
    bool fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
    if (!osxsave || !avx) return f;
    uint64_t xcr0 = read_xcr0();
    bool ymm_ok = (xcr0 & 0x6) == 0x6;
    bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
    if (!ymm_ok) return f;
    unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = b & (1u << 5);
    f.fma = fma;
    f.f16c = f16c;
    if (zmm_ok) {
        f.avx512f = b & (1u << 16);
        f.avx512dq = b & (1u << 17);
        f.avx512bw = b & (1u << 30);
        f.avx512vl = b & (1u << 31);
        f.avx512vnni = c & (1u << 11);
    }
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avxvnni = a1 & (1u << 4);
    if (zmm_ok) f.avx512bf16 = a1 & (1u << 5);
    return f;
}

std::atomic<int> g_isa{-1};
std::atomic<int> g_amx_enabled{-1};

// What the AMX probe found, once per process: the tile state is shared (one OS permission for
// both), the int8 and bf16 multipliers are separate CPUID bits.
struct AmxProbe {
    bool usable = false;       // int8 tiles
    bool bf16_usable = false;  // bf16 tiles
    std::string why_not;       // empty when usable
    std::string bf16_why_not;  // empty when bf16_usable
};

AmxProbe probe_amx() {
    AmxProbe p;
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, nullptr) < 7 || !__get_cpuid(1, &a, &b, &c, &d)) {
        p.why_not = "no CPUID leaf 7: no amx_int8";
        p.bf16_why_not = "no CPUID leaf 7: no amx_bf16";
        return p;
    }
    const bool osxsave = c & (1u << 27);
    __cpuid_count(7, 0, a, b, c, d);
    const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    const char* int8_why = amx_missing(d, xcr0);
    const char* bf16_why = amx_bf16_missing(d, xcr0);
    if (int8_why) p.why_not = int8_why;
    if (bf16_why) p.bf16_why_not = bf16_why;
    if (int8_why && bf16_why) return p;
    // Linux keeps the 8 KiB tile data out of a process's signal frames until it asks for it.
    constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
        const int err = errno;
        const std::string why =
            fmt::format("the OS refused the tile permission (arch_prctl ARCH_REQ_XCOMP_PERM: {})", std::strerror(err));
        if (!int8_why) p.why_not = why;
        if (!bf16_why) p.bf16_why_not = why;
        log_warn("AMX: {}; the packed int8 matmuls use AVX-512 VNNI, no bf16 tiles", why);
        return p;
    }
    p.usable = !int8_why;
    p.bf16_usable = !bf16_why;
    return p;
}

const AmxProbe& amx_probe() {
    static const AmxProbe p = probe_amx();
    return p;
}

const char* tile_state_missing(uint32_t cpuid7_edx) {
    if (!(cpuid7_edx & (1u << 24))) return "CPUID: no amx_tile";
    return nullptr;
}

const char* xcr0_missing(uint64_t xcr0) {
    if ((xcr0 & (uint64_t(3) << 17)) != (uint64_t(3) << 17)) return "the OS does not enable the tile state (XCR0 bits 17/18)";
    return nullptr;
}

}  // namespace

const char* amx_missing(uint32_t cpuid7_edx, uint64_t xcr0) {
    if (const char* why = tile_state_missing(cpuid7_edx)) return why;
    if (!(cpuid7_edx & (1u << 25))) return "CPUID: no amx_int8";
    return xcr0_missing(xcr0);
}

const char* amx_bf16_missing(uint32_t cpuid7_edx, uint64_t xcr0) {
    if (const char* why = tile_state_missing(cpuid7_edx)) return why;
    if (!(cpuid7_edx & (1u << 22))) return "CPUID: no amx_bf16";
    return xcr0_missing(xcr0);
}

bool amx_hardware_available() { return amx_probe().usable; }
bool amx_bf16_hardware_available() { return amx_probe().bf16_usable; }

std::string amx_bf16_status() {
    if (!amx_enabled()) return "disabled by PAGODA_AMX=0";
    if (amx_bf16_hardware_available()) return "available";
    return "absent (" + amx_probe().bf16_why_not + ")";
}

bool amx_enabled() {
    const int v = g_amx_enabled.load();
    if (v >= 0) return v != 0;
    bool on = true;
    if (const char* env = std::getenv("PAGODA_AMX"); env && *env) {
        const std::string s = env;
        if (s == "0") on = false;
        else if (s != "1") fail("PAGODA_AMX={} is not 0 (off) or 1 (on)", s);
        else if (!amx_hardware_available())
            fail("PAGODA_AMX=1 but AMX cannot run here ({}); unset it or use PAGODA_AMX=0", amx_probe().why_not);
    }
    g_amx_enabled.store(on ? 1 : 0);
    return on;
}

void set_amx_enabled(bool on) { g_amx_enabled.store(on ? 1 : 0); }

bool amx_available() { return amx_enabled() && amx_hardware_available(); }

std::string amx_status() {
    if (!amx_enabled()) return "disabled by PAGODA_AMX=0";
    if (amx_hardware_available()) return "available";
    return "absent (" + amx_probe().why_not + ")";
}

std::string CpuFeatures::summary() const {
    std::string s;
    auto add = [&](bool on, const char* name) { if (on) { if (!s.empty()) s += ' '; s += name; } };
    add(avx2, "AVX2"); add(fma, "FMA"); add(f16c, "F16C"); add(avx512f, "AVX512F");
    add(avx512bw, "AVX512BW"); add(avx512vl, "AVX512VL"); add(avx512vnni, "AVX512_VNNI");
    add(avx512bf16, "AVX512_BF16"); add(avxvnni, "AVX_VNNI");
    return s.empty() ? "none" : s;
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures f = detect();
    return f;
}

Isa best_supported_isa() {
    const auto& f = cpu_features();
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c) return Isa::avx512;
    if (f.avx2 && f.fma && f.f16c) return Isa::avx2;
    return Isa::scalar;
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
    }
    return "?";
}

Isa parse_isa(const std::string& name) {
    if (name == "scalar") return Isa::scalar;
    if (name == "avx2") return Isa::avx2;
    if (name == "avx512") return Isa::avx512;
    fail("unknown ISA '{}' (expected scalar, avx2 or avx512)", name);
}

void set_isa(Isa isa) {
    if (int(isa) > int(best_supported_isa()))
        fail("this CPU does not support the {} path (best: {})", isa_name(isa), isa_name(best_supported_isa()));
    g_isa.store(int(isa));
}

Isa active_isa() {
    int v = g_isa.load();
    if (v >= 0) return Isa(v);
    Isa isa = best_supported_isa();
    if (const char* env = std::getenv("PAGODA_ISA"); env && *env) {
        Isa wanted = parse_isa(env);
        if (int(wanted) > int(isa))
            fail("PAGODA_ISA={} but this CPU supports at most {}", env, isa_name(isa));
        isa = wanted;
    }
    g_isa.store(int(isa));
    return isa;
}

}  // namespace pagoda
