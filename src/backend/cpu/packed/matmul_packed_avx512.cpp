// AVX-512 VNNI traits of the packed int8 panel kernel (packed_kernel.h: layout, per-output order).
// One ymm lane per row of a panel: vpdpbusd multiplies the 4-byte code group k of 8 rows with the
// broadcast activation group k, so after the 8 groups of a block each lane holds that row's exact
// int32 block sum (split over two partial sums only to shorten the dependency chain). Q8_0's codes
// (+ 128) go through a correction term. One token runs 2 panels on ymm (sharing each activation
// broadcast); more tokens join 2 panels per zmm x up to 8 tokens a pass. Q4_0 / Q4_1 / Q4_K at few
// tokens a pass multiply the high nibbles in place (16 x code) and shift the exact sum right by 4.
// Both entry points (f32 rows, prequantised rows) hand steps of amx_min_tokens() or more to the AMX
// tile kernel where it runs (run_packed; matmul_amx.h): bitwise these results, from the same operands.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "core/error.h"
#include "backend/cpu/amx/matmul_amx.h"
#include "backend/cpu/packed/packed_kernel.h"
#include "backend/cpu/packed/packed_kernel_wide.h"
#include "backend/cpu/packed/packed_panel_zmm.h"
#include "backend/cpu/simd/avx512.h"

namespace pagoda::backend::cpu::detail {
namespace {

// The per-token arithmetic on one panel (ymm: 8 rows) or on two panels joined in one zmm (16 rows:
// half the instructions per output for prefill, where the unpacked codes serve many tokens). Each
// lane does the same operations in the same order either way, so results are bitwise equal.
struct Ymm : YmmOps {
    static constexpr bool kQ8Signed = false, kHighInPlace = true, kPairSums = false;
    static constexpr int kRegisters = 32;
    template <bool Signed>
    static I dot(I acc, I u, I s) { return _mm256_dpbusd_epi32(acc, u, s); }
};
struct Zmm : simd::Avx512 {
    using F = V;
    using I = __m512i;
    using simd::Avx512::add;
    using simd::Avx512::set1;
    static constexpr int kPanels = 2;
    static constexpr bool kQ8Signed = false, kHighInPlace = true, kPairSums = false;
    static constexpr int kRegisters = 32;
    static constexpr bool kJoinedDecode = true;
    template <bool Signed>
    static I dot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
    template <Fmt Format, bool HighInPlace>
    [[gnu::always_inline]] static void decode_joined(const uint8_t* const* pb, const uint8_t* const* sbp, I* c, F& sc, F& mn,
                                                     const SuperScales* ss) {
        decode_joined_block<Format, HighInPlace>(pb, sbp, c, sc, mn, ss);
    }
    static I join(const __m256i* parts) { return _mm512_inserti64x4(_mm512_castsi256_si512(parts[0]), parts[1], 1); }
    static F join(const __m256* parts) { return _mm512_insertf32x8(_mm512_castps256_ps512(parts[0]), parts[1], 1); }
    static I bcast(const int8_t* p) {
        int32_t v;
        std::memcpy(&v, p, 4);
        return _mm512_set1_epi32(v);
    }
    static I set1(int32_t v) { return _mm512_set1_epi32(v); }
    static I zero_i() { return _mm512_setzero_si512(); }
    static I add(I a, I b) { return _mm512_add_epi32(a, b); }
    static I srai4(I a) { return _mm512_srai_epi32(a, 4); }
    static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
};

void run_packed(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                const GemmTiles& tiles) {
    // Bitwise the same results (amx_kernel.h), so the choice by token count keeps batch invariance.
    if (amx_path_taken(n_tokens)) return matmul_packed_amx(w, acts, n_tokens, y, pool, tiles);
    packed_by_type<Ymm, Zmm, 2, 8, WidePrefill>(w, acts, n_tokens, y, pool, tiles.mc);
}

}  // namespace

void matmul_packed_avx512(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                          const GemmTiles& tiles) {
    packed_from_rows<Ymm>(w, x, n_tokens, y, pool, tiles, run_packed);
}

void prequantize_token_avx512(const float* x, int64_t t, int64_t n_tokens, int64_t cols, void* storage) {
    prequantize_token(x, t, n_tokens, cols, storage);
}

void matmul_packed_prequantized_avx512(const PackedWeight& w, const void* storage, int64_t n_tokens, float* y,
                                       ThreadPool& pool, const GemmTiles& tiles) {
    packed_from_prequantized<Ymm>(w, storage, n_tokens, y, pool, tiles, run_packed);
}

}  // namespace pagoda::backend::cpu::detail
