// pack_weight and matmul(PackedWeight): the repacking is plain byte shuffling done once per tensor;
// the kernels are matmul_packed_avx512.cpp / matmul_packed_avx2.cpp (int8 panels), matmul_bf16_avx512.cpp (bf16 panels, packed
// by packed_bf16_avx512.cpp) and amx_bf16_kernel.h (the same panels padded to K tiles).
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/amx/matmul_amx.h"
#include "backend/cpu/matmul/matmul_paths.h"
#include "quant/block_formats.h"

namespace pagoda::backend::cpu {

using gguf::GgmlType;

namespace {

bool is_bf16_packable(GgmlType t) { return t == GgmlType::F16 || t == GgmlType::BF16; }

// Int8 panels run on the VNNI kernel (AVX-512 VNNI) or else on the AVX2 kernel: the same results.
bool packed_kernel_available() { return active_isa() >= Isa::avx2; }


// Codes of a Q4_0 / Q4_K block (code(v), v < 32) as the 4 interleaved nibble vectors of row r.
template <class Code>
void put_nibbles(uint8_t* out, int r, Code code) {
    for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 4; ++i) out[32 * k + 4 * r + i] = uint8_t(code(4 * k + i) | (code(16 + 4 * k + i) << 4));
}

void pack_row(GgmlType type, const uint8_t* row, int64_t nb, int r, uint8_t* panel) {
    if (type == GgmlType::Q4_K || type == GgmlType::Q5_K) {
        const bool q5 = type == GgmlType::Q5_K;
        const int64_t src_bytes = q5 ? 176 : 144, pbb = q5 ? 176 : 144;
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t* blk = row + sb * src_bytes;
            uint8_t* head = panel + sb * 32;  // the headers first, then the blocks
            std::memcpy(head + 2 * r, blk, 2);
            std::memcpy(head + 16 + 2 * r, blk + 2, 2);
            for (int j = 0; j < 8; ++j) {
                uint8_t* ob = panel + nb / 8 * 32 + (sb * 8 + j) * pbb;
                const uint8_t* qs = blk + (q5 ? 48 : 16) + 32 * (j / 2);
                const uint8_t* qh = blk + 16;
                put_nibbles(ob, r, [&](int v) { return (qs[v] >> (4 * (j % 2))) & 15; });
                if (q5)
                    for (int i = 0; i < 4; ++i) {
                        uint8_t bits = 0;
                        for (int g = 0; g < 8; ++g) bits = uint8_t(bits | (((qh[4 * g + i] >> j) & 1) << g));
                        ob[128 + 4 * r + i] = bits;
                    }
                quant::k_scale_min(j, blk + 4, ob[pbb - 16 + r], ob[pbb - 8 + r]);
            }
        }
        return;
    }
    if (type == GgmlType::Q6_K) {
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t* blk = row + sb * 210;
            std::memcpy(panel + sb * 16 + 2 * r, blk + 208, 2);  // the headers first, then the blocks
            for (int j = 0; j < 8; ++j) {
                uint8_t* ob = panel + nb / 8 * 16 + (sb * 8 + j) * 208;
                const int h = j / 4, k = j % 4;
                const uint8_t* ql = blk + 64 * h + 32 * (k & 1);
                const uint8_t* qh = blk + 128 + 32 * h;
                auto code = [&](int v) { return ((k < 2 ? ql[v] : ql[v] >> 4) & 15) | (((qh[v] >> (2 * k)) & 3) << 4); };
                put_nibbles(ob, r, [&](int v) { return code(v) & 15; });
                for (int half = 0; half < 2; ++half)
                    for (int i = 0; i < 4; ++i) {
                        uint8_t bits = 0;
                        for (int g = 0; g < 4; ++g) bits = uint8_t(bits | ((code(4 * (4 * half + g) + i) >> 4) << (2 * g)));
                        ob[128 + 32 * half + 4 * r + i] = bits;
                    }
                ob[192 + r] = blk[192 + 2 * j];
                ob[200 + r] = blk[192 + 2 * j + 1];
            }
        }
        return;
    }
    if (type == GgmlType::Q4_1) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = row + b * 20;
            uint8_t* out = panel + b * 160;
            for (int k = 0; k < 4; ++k) std::memcpy(out + 32 * k + 4 * r, blk + 4 + 4 * k, 4);  // as Q4_0
            std::memcpy(out + 128 + 2 * r, blk, 2);
            std::memcpy(out + 144 + 2 * r, blk + 2, 2);
        }
        return;
    }
    if (type == GgmlType::Q5_0) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = row + b * 22;
            uint8_t* out = panel + b * 176;
            uint32_t qh;
            std::memcpy(&qh, blk + 2, 4);  // bit v: the fifth bit of value v (little-endian, as stored)
            for (int k = 0; k < 4; ++k) std::memcpy(out + 32 * k + 4 * r, blk + 6 + 4 * k, 4);  // as Q4_0
            // Byte i of the row's group: bit g = fifth bit of value 4g + i (group g, as Q5_K's).
            for (int i = 0; i < 4; ++i) {
                uint8_t bits = 0;
                for (int g = 0; g < 8; ++g) bits = uint8_t(bits | (((qh >> (4 * g + i)) & 1) << g));
                out[128 + 4 * r + i] = bits;
            }
            std::memcpy(out + 160 + 2 * r, blk, 2);
        }
        return;
    }
    if (type == GgmlType::IQ4_XS) {
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t* blk = row + sb * 136;
            std::memcpy(panel + sb * 16 + 2 * r, blk, 2);  // the headers (f16 d) first, then the blocks
            uint16_t scales_h;
            std::memcpy(&scales_h, blk + 2, 2);
            for (int j = 0; j < 8; ++j) {
                uint8_t* ob = panel + nb / 8 * 16 + (sb * 8 + j) * 136;
                // Sub-block j's 16 index bytes pair values i and 16 + i as Q4_0's do.
                for (int k = 0; k < 4; ++k) std::memcpy(ob + 32 * k + 4 * r, blk + 8 + 16 * j + 4 * k, 4);
                const int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 15) | (((scales_h >> (2 * j)) & 3) << 4);
                ob[128 + r] = uint8_t(int8_t(ls - 32));
            }
        }
        return;
    }
    if (type == GgmlType::MXFP4) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = row + b * 17;
            uint8_t* out = panel + b * 136;
            for (int k = 0; k < 4; ++k) std::memcpy(out + 32 * k + 4 * r, blk + 1 + 4 * k, 4);  // as Q4_0
            out[128 + r] = blk[0];  // the e8m0 scale byte
        }
        return;
    }
    // Q4_0 and IQ4_NL (the same block bytes: f16 d, then 16 nibble bytes), Q8_0.
    const bool q4 = type == GgmlType::Q4_0 || type == GgmlType::IQ4_NL;
    const int64_t src_bytes = q4 ? 18 : 34, pbb = q4 ? 144 : 272;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * src_bytes;
        const uint8_t* qs = blk + 2;
        uint8_t* out = panel + b * pbb;
        if (q4) {
            // Q4_0 (and IQ4_NL's indices) already pair value v (low nibble) with v + 16 (high nibble)
            // in byte v: its bytes are the nibble vectors' bytes.
            for (int k = 0; k < 4; ++k) std::memcpy(out + 32 * k + 4 * r, qs + 4 * k, 4);
        } else {
            for (int k = 0; k < 8; ++k)
                for (int i = 0; i < 4; ++i) out[32 * k + 4 * r + i] = uint8_t(qs[4 * k + i] ^ 0x80);
        }
        std::memcpy(out + pbb - 16 + 2 * r, blk, 2);
    }
}

}  // namespace

// Zeroed (fresh anonymous pages: nothing is written until packing), 2 MiB-aligned, advised for huge
// pages (advice only: failure leaves 4 KiB pages). The alignment slack is address space only.
std::shared_ptr<uint8_t> detail::alloc_huge(size_t bytes) {
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t map_bytes = bytes + kHuge;
    void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    auto* base = static_cast<uint8_t*>(m);
    uint8_t* p = base + (kHuge - reinterpret_cast<uintptr_t>(base) % kHuge) % kHuge;
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    return std::shared_ptr<uint8_t>(p, [base, map_bytes](uint8_t*) { munmap(base, map_bytes); });
}

PackedWeight pack_weight(const WeightView& w) { return pack_weights(std::span<const WeightView>(&w, 1)); }

PackedWeight pack_weights(std::span<const WeightView> parts) {
    if (parts.empty()) fail("pack_weights: no matrices to pack");
    PackedWeight p;
    p.source_ = parts[0];
    p.source_.rows = 0;
    for (const WeightView& w : parts) {
        require_matmul_support(w.type, "pack_weight");
        if (w.rows < 0 || w.cols < 0) fail("pack_weight: negative shape");
        if (w.type != parts[0].type || w.cols != parts[0].cols)
            fail("pack_weights: stacked matrices must share type and width ({} x {} vs {} x {})",
                 gguf::type_name(uint32_t(w.type)), w.cols, gguf::type_name(uint32_t(parts[0].type)), parts[0].cols);
        (void)detail::row_bytes(w);
        p.source_.rows += w.rows;
    }
    p.parts_.assign(parts.begin(), parts.end());
    if (parts.size() > 1) p.source_.data = nullptr;
    const WeightView& w = p.source_;
    if (is_bf16_packable(w.type)) {
        const bool tiles = bf16_tiles_available();
        if ((!tiles && !bf16_kernel_available()) || w.rows == 0 || w.cols == 0) return p;
        const int64_t panel_bytes = tiles ? detail::bf16_tile_panel_bytes(w.cols) : detail::bf16_panel_bytes(w.cols);
        p.bytes_ = size_t((w.rows + detail::kBf16PanelRows - 1) / detail::kBf16PanelRows * panel_bytes);
        p.data_ = detail::alloc_huge(p.bytes_);  // zeroed: padding rows, the odd column and the K padding stay zero
        detail::pack_bf16_panels(parts, p.data_.get(), panel_bytes);
        p.layout_ = tiles ? PackedWeight::Layout::bf16_tiles : PackedWeight::Layout::bf16_panels;
        return p;
    }
    const bool packable = w.type == GgmlType::Q4_0 || w.type == GgmlType::Q4_1 || w.type == GgmlType::Q5_0 ||
                          w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_K ||
                          w.type == GgmlType::Q5_K || w.type == GgmlType::Q6_K || w.type == GgmlType::IQ4_NL ||
                          w.type == GgmlType::IQ4_XS || w.type == GgmlType::MXFP4;
    if (!packable || !packed_kernel_available() || w.rows == 0 || w.cols == 0) return p;
    const int64_t rb = detail::row_bytes(w);
    const int64_t nb = w.cols / 32, n_panels = (w.rows + detail::kPanelRows - 1) / detail::kPanelRows;
    const int64_t panel_bytes = detail::packed_panel_bytes(w.type, nb);
    p.bytes_ = size_t(n_panels * panel_bytes);
    p.data_ = detail::alloc_huge(p.bytes_);  // zeroed: padding rows have zero codes and scales
    p.layout_ = PackedWeight::Layout::int8_panels;
    int64_t row = 0;
    for (const WeightView& part : parts) {
        const auto* src = static_cast<const uint8_t*>(part.data);
        for (int64_t r = 0; r < part.rows; ++r, ++row)
            pack_row(w.type, src + r * rb, nb, int(row % detail::kPanelRows),
                     p.data_.get() + row / detail::kPanelRows * panel_bytes);
    }
    return p;
}

size_t prequantized_bytes(int64_t n_tokens, int64_t cols) {
    const int64_t nbp = (cols / 32 + 7) / 8 * 8;
    return size_t((n_tokens * cols + 63) / 64 * 64 + n_tokens * nbp * 12);
}

bool vnni_panels_active() { return active_isa() == Isa::avx512 && cpu_features().avx512vnni; }

bool packed_int8_path_active() { return packed_kernel_available() && quant_method() == QuantMethod::int8_dot; }

bool takes_prequantized(const PackedWeight& w) {
    return w.layout() == PackedWeight::Layout::int8_panels && packed_int8_path_active();
}

void prequantize_row(const float* x, int64_t t, int64_t n_tokens, int64_t cols, void* storage) {
    if (!packed_kernel_available()) fail("prequantize_row: the packed int8 kernel is not available on this path");
    if (vnni_panels_active()) detail::prequantize_token_avx512(x, t, n_tokens, cols, storage);
    else detail::prequantize_token_avx2(x, t, n_tokens, cols, storage);
}

void matmul_prequantized(const PackedWeight& w, const void* storage, int64_t n_tokens, float* y, ThreadPool& pool) {
    if (!takes_prequantized(w)) fail("matmul: this weight does not take prequantised activations on this path");
    if (n_tokens < 0) fail("matmul: negative shape");
    if (n_tokens == 0 || w.source().rows == 0) return;
    if (vnni_panels_active()) detail::matmul_packed_prequantized_avx512(w, storage, n_tokens, y, pool, gemm_tiles());
    else detail::matmul_packed_prequantized_avx2(w, storage, n_tokens, y, pool, gemm_tiles());
}

void matmul(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
    using Layout = PackedWeight::Layout;
    if (w.layout() == Layout::bf16_panels && bf16_kernel_available()) {
        if (n_tokens < 0) fail("matmul: negative shape");
        if (n_tokens == 0 || w.source().rows == 0) return;
        return detail::matmul_bf16_avx512(w, x, n_tokens, y, pool, gemm_tiles());
    }
    if (w.layout() == Layout::bf16_tiles && bf16_tiles_available()) {
        if (n_tokens < 0) fail("matmul: negative shape");
        if (n_tokens == 0 || w.source().rows == 0) return;
        return detail::matmul_bf16_tiles(w, x, n_tokens, y, pool, gemm_tiles());
    }
    if (w.layout() == Layout::int8_panels && packed_kernel_available() && quant_method() == QuantMethod::int8_dot) {
        if (n_tokens < 0) fail("matmul: negative shape");
        if (n_tokens == 0 || w.source().rows == 0) return;
        if (vnni_panels_active()) return detail::matmul_packed_avx512(w, x, n_tokens, y, pool, gemm_tiles());
        return detail::matmul_packed_avx2(w, x, n_tokens, y, pool, gemm_tiles());
    }
    if (w.parts().size() <= 1) return matmul(w.source(), x, n_tokens, y, pool);
    // Stacked without a packed kernel: each part on its own, its outputs moved into their columns.
    if (n_tokens < 0) fail("matmul: negative shape");
    thread_local std::vector<float> part_out;
    const int64_t total = w.source().rows;
    int64_t offset = 0;
    for (const WeightView& part : w.parts()) {
        part_out.resize(size_t(n_tokens * part.rows));
        matmul(part, x, n_tokens, part_out.data(), pool);
        for (int64_t t = 0; t < n_tokens; ++t)
            std::memcpy(y + t * total + offset, part_out.data() + t * part.rows, size_t(part.rows) * sizeof(float));
        offset += part.rows;
    }
}

}  // namespace pagoda::backend::cpu
