// Packing of F16 / BF16 weights into bf16 panels (layout: PackedWeight in matmul.h), for the vdpbf16ps
// kernel and, padded to whole 16-pair K tiles, for the AMX bf16 tiles. Runs once per tensor at model
// load; vectorised because a 1B-parameter model is a few gigabytes of it. F16 -> f32 is exact and
// f32 -> bf16 rounds to nearest even (bf16_round.h: the bytes of vcvtne2ps2bf16, in AVX-512F
// instructions, so hosts without AVX-512 BF16 pack the AMX layout too); f16 values are never f32
// denormals, so the flush of denormals never applies here.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/simd/bf16_round.h"
#include "backend/cpu/matmul/matmul_paths.h"

namespace pagoda::backend::cpu::detail {
namespace {

// Column pairs [2j, 2j+2) for j in [j0, j0 + n) of one row as 16 dwords (bf16 pairs), zero past cols.
__m512i load_pairs(gguf::GgmlType type, const uint16_t* row, int64_t cols, int64_t j0) {
    const int64_t c0 = 2 * j0, left = cols - c0;
    const __mmask32 m = left >= 32 ? ~__mmask32(0) : __mmask32((uint32_t(1) << left) - 1);
    const __m512i raw = _mm512_maskz_loadu_epi16(m, row + c0);
    if (type == gguf::GgmlType::BF16) return raw;
    const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(raw));
    const __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(raw, 1));
    return bf16_round_pairs(lo, hi);
}

}  // namespace

void pack_bf16_panels(std::span<const WeightView> parts, uint8_t* out, int64_t panel_bytes) {
    const int64_t cols = parts[0].cols, n_pairs = (cols + 1) / 2;
    const gguf::GgmlType type = parts[0].type;
    int64_t row = 0;
    for (const WeightView& part : parts) {
        for (int64_t r = 0; r < part.rows; ++r, ++row) {
            const uint16_t* src = static_cast<const uint16_t*>(part.data) + r * cols;
            uint8_t* dst = out + row / kBf16PanelRows * panel_bytes + row % kBf16PanelRows * 4;
            for (int64_t j0 = 0; j0 < n_pairs; j0 += 16) {
                alignas(64) uint32_t pairs[16];
                _mm512_store_si512(pairs, load_pairs(type, src, cols, j0));
                const int64_t n = std::min<int64_t>(16, n_pairs - j0);
                for (int64_t j = 0; j < n; ++j) std::memcpy(dst + (j0 + j) * 64, &pairs[j], 4);
            }
        }
    }
}

}  // namespace pagoda::backend::cpu::detail
