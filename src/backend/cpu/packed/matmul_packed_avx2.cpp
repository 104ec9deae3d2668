// AVX2 traits of the packed int8 panel kernel (packed_kernel.h: layout, per-output order), for CPUs
// without AVX-512 VNNI (Zen 3, Haswell..Comet Lake; AVX-512 parts without VNNI). One ymm lane per row
// of a panel, as the VNNI kernel: vpmaddubsw multiplies the 4-byte code group k of 8 rows (unsigned)
// with the broadcast activation group k (signed) into int16 pairs and vpmaddwd adds each pair into the
// row's int32 lane: the same exact block sums as vpdpbusd. No pair saturates int16: 4-bit codes <= 15,
// Q5_K's <= 31, Q6_K's <= 63 (x 127 x 2 < 32767), and the high nibbles are never multiplied in place
// (16 x 15 x 127 x 2 would). Q8_0's codes are stored + 128 (255 x 127 x 2 would saturate), so they are
// turned back into signed bytes and multiplied as |c| x sign(q, c) (at most 128 x 127 x 2), with no
// correction term: the activations are quantised with offset 0 for them (packed_offset). Unsigned
// codes sum 8 (4-bit codes), 4 (Q5_K) or 2 (Q6_K) pair vectors in int16 before widening (dot_pairs:
// exact, fewer vpmaddwd).
#include <immintrin.h>

#include "core/error.h"
#include "backend/cpu/packed/packed_kernel.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx2Ymm : YmmOps {
    static constexpr bool kQ8Signed = true, kHighInPlace = false, kPairSums = true;
    static constexpr int kRegisters = 16;
    template <bool Signed>
    static I dot(I acc, I u, I q) {
        if constexpr (Signed) {
            const I c = _mm256_xor_si256(u, _mm256_set1_epi8(char(0x80)));
            return dot_u8i8(acc, _mm256_abs_epi8(c), _mm256_sign_epi8(q, c));
        } else {
            return dot_u8i8(acc, u, q);
        }
    }
    // N (2, 4 or 8) code vectors: their int16 pair products summed (as a tree: short dependency
    // chains, and integer sums in any order are the same) before one widening vpmaddwd. N is a
    // template argument so that every step unrolls: a loop over a runtime count kept GCC 12 from
    // unrolling, and the code vectors and accumulators then lived on the stack (half the speed on Zen).
    template <int N>
    static I dot_pairs(I acc, const I* u, const I* q) {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(pair_sum<0, N>(u, q), _mm256_set1_epi16(1)));
    }
    template <int K, int N>
    static I pair_sum(const I* u, const I* q) {
        if constexpr (N == 1) return _mm256_maddubs_epi16(u[K], q[K]);
        else return _mm256_add_epi16(pair_sum<K, N / 2>(u, q), pair_sum<K + N / 2, N / 2>(u, q));
    }
};

// Prefill: 1 panel x 8 tokens a call (its 8 code vectors stay in registers while the tokens pass).
// Measured on Zen 3 against 2 panels x 4 tokens (the matmul of 64 tokens from cache, 3 runs): Q4_0
// and Q8_0 the same, Q4_K +15 %, Q6_K +50 %; small Q4_K_M pp512 +10 %, Q4_0 -1 % (noise).
void run_packed(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                const GemmTiles& tiles) {
    packed_by_type<Avx2Ymm, Avx2Ymm, 1, 8>(w, acts, n_tokens, y, pool, tiles.mc);
}

}  // namespace

void matmul_packed_avx2(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                        const GemmTiles& tiles) {
    packed_from_rows<Avx2Ymm>(w, x, n_tokens, y, pool, tiles, run_packed);
}

void prequantize_token_avx2(const float* x, int64_t t, int64_t n_tokens, int64_t cols, void* storage) {
    prequantize_token(x, t, n_tokens, cols, storage);
}

void matmul_packed_prequantized_avx2(const PackedWeight& w, const void* storage, int64_t n_tokens, float* y,
                                     ThreadPool& pool, const GemmTiles& tiles) {
    packed_from_prequantized<Avx2Ymm>(w, storage, n_tokens, y, pool, tiles, run_packed);
}

}  // namespace pagoda::backend::cpu::detail
