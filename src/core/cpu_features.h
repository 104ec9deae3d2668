// What the processor can do (CPUID + OS support for the register state), and which kernel path
// pagoda uses. The path is the best one the CPU supports unless PAGODA_ISA=scalar|avx2|avx512
// (or set_isa) forces a lower one, so tests can exercise every path on one machine.
#pragma once
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

}  // namespace pagoda
