// The CPU backend: the kernels of this folder (scalar / AVX2 / AVX-512 paths chosen at run time by
// pagoda::active_isa(), the packed VNNI and bf16 panels, paged flash attention) behind the Backend
// interface, on a persistent thread pool. Activations are f32. Weights are repacked once at upload
// (cpu::pack_weights; several parts of one type are stacked so their input is read and
// quantised once) and the file pages they were packed from are dropped from the process. Every
// fused op runs the same kernels on the same values as its unfused sequence, in fewer passes and
// parallel regions, so fused and unfused graphs agree bit for bit (fused_bitwise() is true).
#pragma once
#include <memory>

#include "backend/backend.h"

namespace pagoda::backend {
namespace cpu {
struct PlanSettings;
}

// With the process's plan as installed now (set_kernel_plan), or with a plan of its own
// (cpu/plan/kernel_plan.h plan_settings): a backend keeps its plan and attention settings for its
// lifetime, whatever another backend or set_kernel_plan does later.
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options, const cpu::PlanSettings& plan);

}  // namespace pagoda::backend
