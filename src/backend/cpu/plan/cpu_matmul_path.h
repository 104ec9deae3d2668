// The name of the path a CPU matmul takes, for logs and `describe_matmul` (backend.h): the weight
// type, the kernel (panels, AMX tiles, int8 dot, f32 fma) under the plan's choice for this token
// count and what this CPU runs, whether the parts are stacked, the ISA, gemv or gemm; and the
// arithmetic that path runs on, for the compute bound of `pagoda bench`.
#pragma once
#include <cstdint>
#include <string>

#include "backend/cpu/cpu_weight.h"
#include "backend/cpu/plan/kernel_plan.h"

namespace pagoda::backend::cpu {

// Under the backend's plan (kernel_plan.h PlanSettings).
std::string describe_matmul_path(const CpuWeight& w, int64_t n_tokens, const PlanSettings& plan);
// The arithmetic of that path (Backend::matmul_arithmetic).
MatmulArithmetic matmul_path_arithmetic(const CpuWeight& w, int64_t n_tokens, const PlanSettings& plan);

}  // namespace pagoda::backend::cpu
