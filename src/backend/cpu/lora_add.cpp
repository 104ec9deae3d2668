#include "backend/cpu/lora_add.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::backend::cpu_impl {
namespace {

// sum_i a[i] * b[i] in a fixed order: eight lanes (which the compiler keeps as one vector), the
// lanes summed pairwise, then the tail in order.
inline float dot(const float* a, const float* b, int64_t n) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) lane[k] += a[i + k] * b[i + k];
    float s = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

struct Item {  // one row of one segment
    const LoraSegment* seg;
    int32_t row;
    int64_t h_offset;  // its rank values in the scratch
};

}  // namespace

void lora_add_f32(const Tensor& x, const Tensor& y, std::span<const LoraSegment> segments, ThreadPool& threads,
                  std::vector<float>& scratch) {
    if (x.rows != y.rows) fail("cpu backend: lora_add: x has {} rows but y {}", x.rows, y.rows);
    std::vector<Item> items;
    int64_t h_size = 0;
    for (const LoraSegment& s : segments)
        for (int32_t t : s.rows) {
            if (t < 0 || t >= x.rows) fail("cpu backend: lora_add: row {} is outside the step's {} rows", t, x.rows);
            items.push_back({&s, t, h_size});
            h_size += s.rank;
        }
    if (items.empty()) return;
    if (int64_t(scratch.size()) < h_size) scratch.resize(size_t(h_size));
    const auto* xs = static_cast<const float*>(x.data);
    auto* ys = static_cast<float*>(y.data);
    const int64_t in = x.cols, out = y.cols;
    float* h = scratch.data();
    // h = A x: one unit per (item, rank row); the adapters' A rows stream once per row.
    const int64_t n_items = int64_t(items.size());
    threads.parallel_for(n_items, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) {
            const Item& it = items[size_t(i)];
            const float* xt = xs + int64_t(it.row) * in;
            for (int64_t r = 0; r < it.seg->rank; ++r) h[it.h_offset + r] = dot(it.seg->a + r * in, xt, in);
        }
    });
    // y += scale * B h: split by output columns, so a decode step of one row still uses every thread.
    constexpr int64_t kColumnChunk = 64;
    const int64_t chunks = (out + kColumnChunk - 1) / kColumnChunk;
    threads.parallel_for(chunks * n_items, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t u = begin; u < end; ++u) {
            const Item& it = items[size_t(u / chunks)];
            const int64_t o0 = (u % chunks) * kColumnChunk, o1 = std::min(out, o0 + kColumnChunk);
            const int64_t rank = it.seg->rank;
            const float* ht = h + it.h_offset;
            float* yt = ys + int64_t(it.row) * out;
            for (int64_t o = o0; o < o1; ++o) yt[o] += it.seg->scale * dot(it.seg->b + o * rank, ht, rank);
        }
    });
}

}  // namespace pagoda::backend::cpu_impl
