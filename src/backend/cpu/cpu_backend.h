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

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);

}  // namespace pagoda::backend
