// What the processor can do (CPUID + OS support for the register state), and which kernel path
// pagoda uses. The path is the best one the CPU supports unless PAGODA_ISA=scalar|avx2|avx512
// (or set_isa) forces a lower one, so tests can exercise every path on one machine.
#pragma once
#include <cstdint>
#include <string>

namespace pagoda {

struct CpuFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
    bool avx512vnni = false, avx512bf16 = false, avxvnni = false;
    std::string summary() const;
};

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

const CpuFeatures& cpu_features();
Isa best_supported_isa();
Isa active_isa();              // honours PAGODA_ISA on first call
void set_isa(Isa isa);         // throws if the CPU lacks it
Isa parse_isa(const std::string& name);  // throws on an unknown name
const char* isa_name(Isa isa);

// AMX int8 tiles (Sapphire Rapids and later). Usable when CPUID leaf 7 says amx_tile and amx_int8
// (EDX bits 24, 25), the OS enables the tile state (XCR0 bits 17 XTILECFG and 18 XTILEDATA), and
// Linux grants this process the tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18),
// requested once per process on the first call and cached; a refusal is logged once).
// amx_missing: the reason the CPUID / XCR0 bits rule AMX out, or nullptr when they allow it (pure,
// so tests can feed it any CPU).
const char* amx_missing(uint32_t cpuid7_edx, uint64_t xcr0);
bool amx_hardware_available();  // CPUID + XCR0 + the OS permission (ignores PAGODA_AMX)
// PAGODA_AMX=0 turns the AMX path off, =1 insists on it (an error where the hardware cannot run it;
// any other value is an error too); unset: on where available. Read on the first call.
bool amx_enabled();
void set_amx_enabled(bool on);  // for tests: the switch only, the hardware still decides amx_available
bool amx_available();           // amx_enabled() && amx_hardware_available()
// "available", "disabled by PAGODA_AMX=0", or "absent (...)" with the reason.
std::string amx_status();
// AMX bf16 tiles (TDPBF16PS): CPUID leaf 7 EDX bit 22 (amx_bf16) with amx_tile, the same tile state
// and the same OS permission as the int8 tiles. PAGODA_AMX switches both.
const char* amx_bf16_missing(uint32_t cpuid7_edx, uint64_t xcr0);
bool amx_bf16_hardware_available();
std::string amx_bf16_status();

}  // namespace pagoda
