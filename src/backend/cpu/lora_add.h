// The CPU backend's LoRA update (Backend::lora_add): for each segment, h = A x[t] for its rows, then
// y[t] += scale * B h — two small GEMMs over the gathered rows of one adapter, added in place. Every
// dot product runs in one fixed order (eight f32 lanes, summed pairwise, then the tail), whatever the
// threads or the other rows, so a row's result is the same alone and in any batch.
#pragma once
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace pagoda::backend::cpu_impl {

// x: T x in, y: T x out (f32 rows). `scratch` holds the rank-wide intermediates between calls.
void lora_add_f32(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments, ThreadPool& threads,
                  std::vector<float>& scratch);

}  // namespace pagoda::backend::cpu_impl
