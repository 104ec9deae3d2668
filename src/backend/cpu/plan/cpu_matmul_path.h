// The name of the path a CPU matmul takes, for logs and `describe_matmul` (backend.h): the weight
// type, the kernel (panels, AMX tiles, int8 dot, f32 fma) under the plan's choice for this token
// count and what this CPU runs, whether the parts are stacked, the ISA, gemv or gemm.
#pragma once
#include <cstdint>
#include <string>

#include "backend/cpu/cpu_weight.h"

namespace pagoda::backend::cpu {

std::string describe_matmul_path(const CpuWeight& w, int64_t n_tokens);

}  // namespace pagoda::backend::cpu
