// The CPU backend's LoRA update (Backend::lora_add): for each segment, h = A x[t] for its rows, then
// y[t] += scale * B h — two small GEMMs over the rows of one adapter, added in place. The down pass
// splits a segment by (8 rank rows, 4-row block), rank block outer (a thread reuses its slice of A for
// all rows), the up pass by output chunk: A and B stream once per segment, one row uses every thread.
// A segment's compact form (a_elems / bt_elems: f32, f16 or bf16, B^T in lora_layout.h's tiles) is read
// where given (half the bytes for a half-precision adapter; the up pass a vector FMA over outputs),
// else its f32 A and B. Every value is one dot product in a fixed order (lora_kernels.h) on the best ISA the CPU has
// (scalar, AVX2, AVX-512; PAGODA_ISA forces a lower one), so a row's result is the same alone and in
// any batch, at any thread count.
#pragma once
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace pagoda::backend::cpu {

// One output of an update: row t's `out` values at y + t * y_stride take the segments' updates.
struct LoraOutPart {
    std::span<const LoraSegment> segments;
    float* y;
    int64_t y_stride, out;
};

struct LoraScratch {
    struct Job {  // one segment of one part
        const LoraSegment* segment;
        const LoraOutPart* part;
        int64_t h_offset;
    };
    std::vector<float> h;  // the rank-wide intermediates
    std::vector<Job> jobs;
    std::vector<int64_t> down_units, up_units;  // work-unit boundaries per job and pass
};

// x: T x in, y: T x out (f32 rows).
void lora_add_f32(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments, ThreadPool& threads,
                  LoraScratch& scratch);

// The same over raw rows: row t of x at x + t * x_stride (in values), of y at y + t * y_stride (out
// values), t < n_rows — so an update can land in a part of a wider row (a stacked Q|K|V output).
void lora_add_rows(const float* x, int64_t x_stride, int64_t in, float* y, int64_t y_stride, int64_t out,
                   int64_t n_rows, std::span<const LoraSegment> segments, ThreadPool& threads, LoraScratch& scratch);

// Several outputs of one input (the Q, K, V parts of a fused op): every part's down passes in one
// parallel region and every up pass in the next, each value as lora_add_rows computes it alone.
void lora_add_parts(const float* x, int64_t x_stride, int64_t in, int64_t n_rows, std::span<const LoraOutPart> parts,
                    ThreadPool& threads, LoraScratch& scratch);

}  // namespace pagoda::backend::cpu
