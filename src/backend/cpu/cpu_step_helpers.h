// Helpers the CPU backend's ops and its MoE share: per-token work spread over the pool, and one
// matmul call under the kernel plan's choice for its weight type and token count.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "backend/cpu/matmul/matmul.h"
#include "core/thread_pool.h"

namespace pagoda::backend::cpu {

// Per-token work between the matmuls: spread over the pool when the step has enough tokens,
// inline for a decode step (a parallel region per op is worth it only then). Each token's
// arithmetic is the same either way.
template <class Fn>
void per_token(ThreadPool& threads, int64_t n, const Fn& fn) {
    if (n < 8) {
        for (int64_t t = 0; t < n; ++t) fn(t);
        return;
    }
    threads.parallel_for(n, 4, [&](int64_t begin, int64_t end, int) {
        for (int64_t t = begin; t < end; ++t) fn(t);
    });
}

// y = x W^T from the quantised form of x when the norm made one and this weight reads it, else
// from x. The backend's plan's method and tiles for (type, tokens) hold on this thread for the call.
inline void multiply(const PackedWeight& w, const Tensor& x, const Tensor* xq, float* y, ThreadPool& threads,
                     const PlanSettings& plan) {
    const KernelChoice choice = kernel_choice(plan, w.source().type, x.rows);
    const ScopedKernelChoice scope(choice);
    count_dispatch(choice.method);
    if (xq && takes_prequantized(w)) return matmul_prequantized(w, xq->data, x.rows, y, threads);
    matmul(w, static_cast<const float*>(x.data), x.rows, y, threads);
}

}  // namespace pagoda::backend::cpu
