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
                for (int64_t j = 0; j < u.rank; ++j) sum += u.h[r][j] * load(u.elem, u.bt, j * u.out + o);
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
    const size_t n_seg = segments.size();
    auto& off = scratch.offsets;
    off.assign(n_seg, 0);
    int64_t h_size = 0;
    for (size_t s = 0; s < n_seg; ++s) {
        const LoraSegment& g = segments[s];
        if (g.rank <= 0) fail("cpu backend: lora_add: an adapter of rank {}", g.rank);
        for (int32_t t : g.rows)
            if (t < 0 || t >= n_rows) fail("cpu backend: lora_add: row {} is outside the step's {} rows", t, n_rows);
        off[s] = h_size;
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
    // Work units as prefix sums per segment: the down pass's (row block, rank block) pairs at even
    // indices, the up pass's output chunks at odd ones.
    auto& units = scratch.units;
    units.assign(2 * (n_seg + 1), 0);
    const int64_t out_chunks = (out + kOutChunk - 1) / kOutChunk;
    for (size_t s = 0; s < n_seg; ++s) {
        const LoraSegment& g = segments[s];
        const int64_t row_blocks = (int64_t(g.rows.size()) + kLoraRowBlock - 1) / kLoraRowBlock;
        const int64_t rank_blocks = (g.rank + kRankBlock - 1) / kRankBlock;
        units[2 * (s + 1)] = units[2 * s] + row_blocks * rank_blocks;
        units[2 * (s + 1) + 1] = units[2 * s + 1] + (g.rows.empty() ? 0 : out_chunks);
    }
    auto segment_of = [&](int64_t u, size_t pass) {
        size_t s = 0;
        while (units[2 * (s + 1) + pass] <= u) ++s;
        return s;
    };
    threads.parallel_for(units[2 * n_seg], 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t u = begin; u < end; ++u) {
            const size_t s = segment_of(u, 0);
            const LoraSegment& g = segments[s];
            const int64_t rank_blocks = (g.rank + kRankBlock - 1) / kRankBlock, k = u - units[2 * s];
            const int64_t block = k / rank_blocks, j0 = (k % rank_blocks) * kRankBlock;
            LoraDown d{.elem = elem_of(g), .a = compact(g) ? g.a_elems : g.a, .in = in, .j0 = j0,
                       .j1 = std::min(g.rank, j0 + kRankBlock), .n_rows = 0, .x = {}, .h = {}};
            for (int64_t i = block * kLoraRowBlock; i < int64_t(g.rows.size()) && d.n_rows < kLoraRowBlock; ++i) {
                d.x[d.n_rows] = x + int64_t(g.rows[size_t(i)]) * x_stride;
                d.h[d.n_rows] = h + off[s] + i * g.rank;
                ++d.n_rows;
            }
            down(d);
        }
    });
    threads.parallel_for(units[2 * n_seg + 1], 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t u = begin; u < end; ++u) {
            const size_t s = segment_of(u, 1);
            const LoraSegment& g = segments[s];
            const int64_t o0 = (u - units[2 * s + 1]) * kOutChunk;
            LoraUp p{.elem = elem_of(g), .bt = compact(g) ? g.bt_elems : nullptr, .b = g.b, .rank = g.rank,
                     .out = out, .o0 = o0, .o1 = std::min(out, o0 + kOutChunk), .scale = g.scale, .n_rows = 0,
                     .h = {}, .y = {}};
            for (size_t i = 0; i < g.rows.size();) {
                p.n_rows = 0;
                for (; i < g.rows.size() && p.n_rows < kLoraRowBlock; ++i, ++p.n_rows) {
                    p.h[p.n_rows] = h + off[s] + int64_t(i) * g.rank;
                    p.y[p.n_rows] = y + int64_t(g.rows[i]) * y_stride;
                }
                up(p);
            }
        }
    });
}

}  // namespace pagoda::backend::cpu
