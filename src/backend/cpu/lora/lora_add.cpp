#include "backend/cpu/lora/lora_add.h"

#include <algorithm>

#include "backend/cpu/lora/lora_kernels.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/half.h"

namespace pagoda::backend::cpu {
namespace {

constexpr int64_t kRankBlock = 8;   // rank rows per down-pass unit
constexpr int64_t kOutChunk = 128;  // outputs per up-pass unit (a multiple of 16 lanes)

bool compact(const LoraSegment& s) { return s.a_elems && s.bt_elems; }

LoraElem elem_of(const LoraSegment& s) {
    if (!compact(s)) return LoraElem::f32;
    switch (s.elem) {
        case gguf::GgmlType::F32: return LoraElem::f32;
        case gguf::GgmlType::F16: return LoraElem::f16;
        case gguf::GgmlType::BF16: return LoraElem::bf16;
        default:
            fail("cpu backend: lora_add: an adapter's numbers are {}, not F32, F16 or BF16",
                 gguf::type_name(uint32_t(s.elem)));
    }
}

float load(LoraElem e, const void* p, int64_t i) {
    switch (e) {
        case LoraElem::f32: return static_cast<const float*>(p)[i];
        case LoraElem::f16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
        case LoraElem::bf16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    }
    return 0;
}

}  // namespace

// The scalar path: eight lanes (which the compiler may keep as one vector), summed pairwise, then the
// tail in order; from B^T, the sum over the rank in order.
static float dot8(LoraElem e, const void* a, int64_t a0, const float* b, int64_t n) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) lane[k] += load(e, a, a0 + i + k) * b[i + k];
    float s = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (; i < n; ++i) s += load(e, a, a0 + i) * b[i];
    return s;
}

void lora_down_scalar(const LoraDown& d) {
    for (int r = 0; r < d.n_rows; ++r)
        for (int64_t j = d.j0; j < d.j1; ++j) d.h[r][j] = dot8(d.elem, d.a, j * d.in, d.x[r], d.in);
}

void lora_up_scalar(const LoraUp& u) {
    for (int r = 0; r < u.n_rows; ++r)
        for (int64_t o = u.o0; o < u.o1; ++o) {
            float sum = 0;
            if (u.bt) {
                for (int64_t j = 0; j < u.rank; ++j) sum += u.h[r][j] * load(u.elem, u.bt, lora_bt_index(u.rank, j, o));
            } else {
                sum = dot8(LoraElem::f32, u.b, o * u.rank, u.h[r], u.rank);
            }
            u.y[r][o] += u.scale * sum;
        }
}

void lora_add_f32(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments, ThreadPool& threads,
                  LoraScratch& scratch) {
    if (x.rows != y.rows) fail("cpu backend: lora_add: x has {} rows but y {}", x.rows, y.rows);
    lora_add_rows(static_cast<const float*>(x.data), x.cols, x.cols, static_cast<float*>(y.data), y.cols, y.cols,
                  x.rows, segments, threads, scratch);
}

void lora_add_rows(const float* x, int64_t x_stride, int64_t in, float* y, int64_t y_stride, int64_t out,
                   int64_t n_rows, std::span<const LoraSegment> segments, ThreadPool& threads, LoraScratch& scratch) {
    const LoraOutPart part{segments, y, y_stride, out};
    lora_add_parts(x, x_stride, in, n_rows, {&part, 1}, threads, scratch);
}

void lora_add_parts(const float* x, int64_t x_stride, int64_t in, int64_t n_rows, std::span<const LoraOutPart> parts,
                    ThreadPool& threads, LoraScratch& scratch) {
    // One job per (part, segment), each with its h offset.
    auto& jobs = scratch.jobs;
    jobs.clear();
    int64_t h_size = 0;
    for (const LoraOutPart& part : parts)
        for (const LoraSegment& g : part.segments) {
            if (g.rank <= 0) fail("cpu backend: lora_add: an adapter of rank {}", g.rank);
            for (int32_t t : g.rows)
                if (t < 0 || t >= n_rows) fail("cpu backend: lora_add: row {} is outside the step's {} rows", t, n_rows);
            if (g.rows.empty()) continue;
            jobs.push_back({&g, &part, h_size});
            h_size += int64_t(g.rows.size()) * g.rank;
        }
    if (h_size == 0) return;
    if (int64_t(scratch.h.size()) < h_size) scratch.h.resize(size_t(h_size));
    float* h = scratch.h.data();
    void (*down)(const LoraDown&) = lora_down_scalar;
    void (*up)(const LoraUp&) = lora_up_scalar;
    switch (active_isa()) {
        case Isa::avx512: down = lora_down_avx512; up = lora_up_avx512; break;
        case Isa::avx2: down = lora_down_avx2; up = lora_up_avx2; break;
        case Isa::scalar: break;
    }
    // Work units as prefix sums per job: the down pass's (row block, rank block) pairs, the up pass's
    // output chunks. Every job's down units run in one parallel region and its up units in the next,
    // so the parts of a fused op (Q, K, V) cost two regions, not two each.
    const size_t n_jobs = jobs.size();
    auto& down_units = scratch.down_units;
    auto& up_units = scratch.up_units;
    down_units.assign(n_jobs + 1, 0);
    up_units.assign(n_jobs + 1, 0);
    for (size_t i = 0; i < n_jobs; ++i) {
        const LoraSegment& g = *jobs[i].segment;
        const int64_t row_blocks = (int64_t(g.rows.size()) + kLoraRowBlock - 1) / kLoraRowBlock;
        const int64_t rank_blocks = (g.rank + kRankBlock - 1) / kRankBlock;
        down_units[i + 1] = down_units[i] + row_blocks * rank_blocks;
        up_units[i + 1] = up_units[i] + (jobs[i].part->out + kOutChunk - 1) / kOutChunk;
    }
    auto job_of = [](const std::vector<int64_t>& units, int64_t u) {
        return size_t(std::upper_bound(units.begin(), units.end(), u) - units.begin()) - 1;
    };
    threads.parallel_for(down_units[n_jobs], 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t u = begin; u < end; ++u) {
            const size_t i = job_of(down_units, u);
            const LoraSegment& g = *jobs[i].segment;
            // Rank block outer, row block inner: a thread's contiguous units reuse one slice of A (from
            // L1/L2) for all the rows instead of streaming all of A once per row block.
            const int64_t row_blocks = (int64_t(g.rows.size()) + kLoraRowBlock - 1) / kLoraRowBlock, k = u - down_units[i];
            const int64_t block = k % row_blocks, j0 = (k / row_blocks) * kRankBlock;
            LoraDown d{.elem = elem_of(g), .a = compact(g) ? g.a_elems : g.a, .in = in, .j0 = j0,
                       .j1 = std::min(g.rank, j0 + kRankBlock), .n_rows = 0, .x = {}, .h = {}};
            for (int64_t r = block * kLoraRowBlock; r < int64_t(g.rows.size()) && d.n_rows < kLoraRowBlock; ++r) {
                d.x[d.n_rows] = x + int64_t(g.rows[size_t(r)]) * x_stride;
                d.h[d.n_rows] = h + jobs[i].h_offset + r * g.rank;
                ++d.n_rows;
            }
            down(d);
        }
    });
    threads.parallel_for(up_units[n_jobs], 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t u = begin; u < end; ++u) {
            const size_t i = job_of(up_units, u);
            const LoraSegment& g = *jobs[i].segment;
            const LoraOutPart& part = *jobs[i].part;
            const int64_t o0 = (u - up_units[i]) * kOutChunk;
            LoraUp p{.elem = elem_of(g), .bt = compact(g) ? g.bt_elems : nullptr, .b = g.b, .rank = g.rank,
                     .out = part.out, .o0 = o0, .o1 = std::min(part.out, o0 + kOutChunk), .scale = g.scale,
                     .n_rows = 0, .h = {}, .y = {}};
            for (size_t r = 0; r < g.rows.size();) {
                p.n_rows = 0;
                for (; r < g.rows.size() && p.n_rows < kLoraRowBlock; ++r, ++p.n_rows) {
                    p.h[p.n_rows] = h + jobs[i].h_offset + int64_t(r) * g.rank;
                    p.y[p.n_rows] = part.y + int64_t(g.rows[r]) * part.y_stride;
                }
                up(p);
            }
        }
    });
}

}  // namespace pagoda::backend::cpu
