// Internal: the per-ISA implementations behind matmul(). Files named *_avx2.cpp / *_avx512.cpp are
// compiled with those ISA flags and must only be called when pagoda::active_isa() allows it.
//
// Reduction order (what makes results batch invariant): for the f32 path each output (token t, row r)
// is accumulated in L lanes (16 for avx512, 8 for avx2 and scalar): lane j sums w[k]*x[k] for
// k ≡ j (mod L) in increasing k with one multiply-add each (fused on avx2/avx512), a zero-padded final
// step when cols % L != 0, then the lanes are summed by a fixed tree. Tiling only stores and reloads
// the lane vectors (exact), so the order is independent of tiles, n_tokens and threads. The int8
// method: the scalar kernel keeps one f32 accumulator over 32-value blocks plus one over the per-16
// offset terms (int8_operands.h); the AVX2 / AVX-512 kernels reduce each group of 8 blocks exactly in
// int32 and accumulate 8 f32 lanes over groups (int8_fused.h). The bf16 panels (matmul_bf16_avx512.cpp)
// keep one f32 lane per row and add the column pairs in order (contract: PackedWeight in matmul.h).
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "core/thread_pool.h"
#include "backend/cpu/matmul/matmul.h"

namespace pagoda::backend::cpu::detail {

using MatmulFn = void (*)(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                          const GemmTiles& tiles);

// F32/F16/BF16 weights, and quantised weights through dequantised f32 tiles (dequant_fma).
void matmul_float_scalar(const WeightView&, const float*, int64_t, float*, ThreadPool&, const GemmTiles&);
void matmul_float_avx2(const WeightView&, const float*, int64_t, float*, ThreadPool&, const GemmTiles&);
void matmul_float_avx512(const WeightView&, const float*, int64_t, float*, ThreadPool&, const GemmTiles&);

// Quantised weights, int8 method.
void matmul_int8_scalar(const WeightView&, const float*, int64_t, float*, ThreadPool&, const GemmTiles&);
void matmul_int8_avx2(const WeightView&, const float*, int64_t, float*, ThreadPool&, const GemmTiles&);
void matmul_int8_avx512(const WeightView&, const float*, int64_t, float*, ThreadPool&, const GemmTiles&);

int64_t row_bytes(const WeightView& w);

// Packed panels (see PackedWeight): panel p (rows 8p..8p+7, zero rows past the end) is contiguous.
// Codes of a 32-value block are 32-byte vectors, vector k = the 4-byte code groups k of the 8 rows:
// Q4_0 / Q4_K: 4 vectors of nibble bytes (low nibbles = group k, high nibbles = group k + 4);
// Q8_0: 8 vectors of codes + 128. Q4_0 / Q8_0 blocks: codes, then the 8 rows' f16 scales. Q4_1
// blocks: Q4_0's nibble vectors, the 8 rows' f16 scales d, then their f16 minimums m. Q5_0 blocks:
// Q4_0's nibble vectors of the low 4 bits, one vector of fifth bits (group k at bit k), then the 8
// rows' f16 scales. Q4_K panels:
// first every super-block's header (the 8 rows' f16 d and f16 dmin, 32 bytes), then every 32-block:
// codes, 8 scale bytes, 8 min bytes; Q5_K the same with, after the codes, one vector of fifth bits
// (group k at bit k). Q6_K panels: first every super-block's header (the 8 rows' f16 d), then every
// 32-block: the low 4 bits as Q4_K's nibble vectors, two vectors of the high 2 bits (vector h:
// groups 4h..4h+3 at bits 0-1, 2-3, 4-5, 6-7), and the 8 rows' int8 scales of the first 16 values,
// then of the last 16. (Headers first, the blocks are one run of equal strides, as Q4_0's: with the
// headers between the super-blocks, decode from memory read Q4_K ~7 % slower per byte than Q4_0
// even with the K-quant's extra work taken out; docs/benchmarks.md.) The codebook types keep their
// 4-bit indices as Q4_0's nibble vectors (decode looks them up: codebook value + 128, Q8_0's codes):
// IQ4_NL blocks as Q4_0's (nibbles, then the 8 rows' f16 d); MXFP4 blocks: nibbles, then the 8 rows'
// e8m0 scale bytes; IQ4_XS panels: first every super-block's header (the 8 rows' f16 d), then every
// 32-block: nibbles, then the 8 rows' int8 sub-block scales ls - 32.
constexpr int64_t kPanelRows = 8;
inline int64_t packed_panel_bytes(gguf::GgmlType t, int64_t nb) {
    if (t == gguf::GgmlType::Q4_K) return nb / 8 * (32 + 8 * (128 + 16));
    if (t == gguf::GgmlType::Q5_K) return nb / 8 * (32 + 8 * (128 + 32 + 16));
    if (t == gguf::GgmlType::Q6_K) return nb / 8 * (16 + 8 * (128 + 64 + 16));
    if (t == gguf::GgmlType::Q4_1) return nb * (128 + 32);
    if (t == gguf::GgmlType::Q5_0) return nb * (128 + 32 + 16);
    if (t == gguf::GgmlType::IQ4_XS) return nb / 8 * (16 + 8 * (128 + 8));
    if (t == gguf::GgmlType::MXFP4) return nb * (128 + 8);
    return nb * (t == gguf::GgmlType::Q4_0 || t == gguf::GgmlType::IQ4_NL ? 128 + 16 : 256 + 16);
}
// Prefill tasks take tiles.mc rows (whole panel pairs); steps of at most 16 tokens (decode, decode
// batches) split the panels evenly over the threads, one contiguous range each. The VNNI kernel
// (AVX-512 VNNI) and the AVX2 kernel give bitwise the same results (packed_kernel.h).
void matmul_packed_avx512(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                          const GemmTiles& tiles);
void matmul_packed_avx2(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                        const GemmTiles& tiles);

// Activations quantised ahead of their packed matmuls (PrequantizedLayout in matmul.h's storage):
// the same q and d as matmul_packed_avx512 computes, and per block the exact sums of q over each half,
// from which each weight type's operands are rebuilt with the same arithmetic — bitwise the same results.
void prequantize_token_avx512(const float* x, int64_t t, int64_t n_tokens, int64_t cols, void* storage);
void matmul_packed_prequantized_avx512(const PackedWeight& w, const void* storage, int64_t n_tokens, float* y,
                                       ThreadPool& pool, const GemmTiles& tiles);
void prequantize_token_avx2(const float* x, int64_t t, int64_t n_tokens, int64_t cols, void* storage);
void matmul_packed_prequantized_avx2(const PackedWeight& w, const void* storage, int64_t n_tokens, float* y,
                                     ThreadPool& pool, const GemmTiles& tiles);

// 2 MiB-aligned zeroed memory advised for transparent huge pages (packed weights; see PackedWeight).
std::shared_ptr<uint8_t> alloc_huge(size_t bytes);

// BF16 panels of F16 / BF16 weights (layout: PackedWeight in matmul.h): 16 rows, one 64-byte vector
// per column pair. Only call where bf16_kernel_available() (the AVX-512 BF16 instructions run).
constexpr int64_t kBf16PanelRows = 16;
inline int64_t bf16_panel_bytes(int64_t cols) { return (cols + 1) / 2 * 64; }
// Writes the panels of the parts stacked by rows (rows of part 1 follow part 0's, across panels)
// into out (zeroed, n_panels * panel_bytes bytes; panel_bytes >= bf16_panel_bytes(cols), the rest
// of each panel stays zero). Runs on any AVX-512 CPU.
void pack_bf16_panels(std::span<const WeightView> parts, uint8_t* out, int64_t panel_bytes);
void matmul_bf16_avx512(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                        const GemmTiles& tiles);

// The same panels padded to whole K tiles of 16 column pairs (zero pairs past the columns): the B
// tiles of the AMX bf16 kernel (amx_bf16_kernel.h), K tile k of a panel being its 1 KiB at k * 1024.
constexpr int64_t kBf16TilePairs = 16;
inline int64_t bf16_tile_panel_bytes(int64_t cols) { return ((cols + 1) / 2 + kBf16TilePairs - 1) / kBf16TilePairs * 1024; }

// Counts a packed matmul that took the AVX-512 wide prefill kernel (wide_dispatch_count, matmul.h).
void count_wide_dispatch();

}  // namespace pagoda::backend::cpu::detail
