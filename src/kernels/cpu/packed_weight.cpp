// pack_weight and matmul(PackedWeight): the repacking is plain byte shuffling done once per tensor;
// the kernel is matmul_packed_avx512.cpp.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_paths.h"

namespace pagoda::kernels {

using gguf::GgmlType;

namespace {

bool packed_kernel_available() { return active_isa() == Isa::avx512 && cpu_features().avx512vnni; }

// Zeroed, 2 MiB-aligned, advised for huge pages (advice only: failure leaves 4 KiB pages).
std::shared_ptr<uint8_t> alloc_huge(size_t bytes) {
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, size);
    if (!p) throw std::bad_alloc();
    (void)madvise(p, size, MADV_HUGEPAGE);
    std::memset(p, 0, size);
    return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

}  // namespace

PackedWeight pack_weight(const WeightView& w) {
    require_matmul_support(w.type, "pack_weight");
    if (w.rows < 0 || w.cols < 0) fail("pack_weight: negative shape");
    const int64_t rb = detail::row_bytes(w);
    PackedWeight p;
    p.source_ = w;
    const bool q4 = w.type == GgmlType::Q4_0;
    if ((!q4 && w.type != GgmlType::Q8_0) || !packed_kernel_available() || w.rows == 0 || w.cols == 0) return p;
    const int64_t nb = w.cols / 32, n_panels = (w.rows + detail::kPanelRows - 1) / detail::kPanelRows;
    const int64_t pbb = detail::packed_block_bytes(w.type), block_bytes = q4 ? 18 : 34;
    p.bytes_ = size_t(n_panels * nb * pbb);
    p.data_ = alloc_huge(p.bytes_);
    const auto* src = static_cast<const uint8_t*>(w.data);
    for (int64_t panel = 0; panel < n_panels; ++panel)
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* out = p.data_.get() + (panel * nb + b) * pbb;
            for (int r = 0; r < detail::kPanelRows; ++r) {
                const int64_t row = panel * detail::kPanelRows + r;
                if (row >= w.rows) break;  // padding rows stay zero (codes and scale)
                const uint8_t* blk = src + row * rb + b * block_bytes;
                const uint8_t* qs = blk + 2;
                if (q4) {
                    for (int k = 0; k < 4; ++k) std::memcpy(out + 32 * k + 4 * r, qs + 4 * k, 4);
                } else {
                    for (int k = 0; k < 8; ++k)
                        for (int i = 0; i < 4; ++i) out[32 * k + 4 * r + i] = uint8_t(qs[4 * k + i] ^ 0x80);
                }
                std::memcpy(out + pbb - 16 + 2 * r, blk, 2);
            }
        }
    return p;
}

void matmul(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
    if (w.is_packed() && packed_kernel_available() && quant_method() == QuantMethod::int8_dot) {
        if (n_tokens < 0) fail("matmul: negative shape");
        if (n_tokens == 0 || w.source().rows == 0) return;
        return detail::matmul_packed_avx512(w, x, n_tokens, y, pool);
    }
    matmul(w.source(), x, n_tokens, y, pool);
}

}  // namespace pagoda::kernels
