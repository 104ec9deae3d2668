// The LoRA row kernels (lora_kernels.h) on AVX2 + FMA, 8 lanes: down as on AVX-512 (two
// accumulators per row, 8-value chunks, the tail through a zero-padded copy); up one dot product per
// output (8-value chunks of B's row and h, the tail zero-padded), each reduced in one fixed order.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/lora_kernels.h"

namespace pagoda::backend::cpu_impl {
namespace {

// The first n (< 8) values at p, the rest zero.
inline __m256 load_tail(const float* p, int64_t n) {
    float buf[8] = {};
    std::memcpy(buf, p, size_t(n) * sizeof(float));
    return _mm256_loadu_ps(buf);
}

inline float reduce8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

template <int R>
void down(const LoraDown& d) {
    const int64_t in = d.in, full = in / 8 * 8;
    for (int64_t j = d.j0; j < d.j1; ++j) {
        __m256 acc[2][R];
        for (int r = 0; r < R; ++r) acc[0][r] = acc[1][r] = _mm256_setzero_ps();
        const float* a = d.a + j * in;
        int64_t c = 0;
        int k = 0;
        for (; c < full; c += 8, k ^= 1) {
            const __m256 av = _mm256_loadu_ps(a + c);
            for (int r = 0; r < R; ++r) acc[k][r] = _mm256_fmadd_ps(av, _mm256_loadu_ps(d.x[r] + c), acc[k][r]);
        }
        if (c < in) {
            const __m256 av = load_tail(a + c, in - c);
            for (int r = 0; r < R; ++r) acc[k][r] = _mm256_fmadd_ps(av, load_tail(d.x[r] + c, in - c), acc[k][r]);
        }
        for (int r = 0; r < R; ++r) d.h[r][j] = reduce8(_mm256_add_ps(acc[0][r], acc[1][r]));
    }
}

}  // namespace

void lora_down_avx2(const LoraDown& d) {
    switch (d.n_rows) {
        case 1: return down<1>(d);
        case 2: return down<2>(d);
        case 3: return down<3>(d);
        default: return down<4>(d);
    }
}

void lora_up_avx2(const LoraUp& u) {
    const int64_t rank = u.rank, full = rank / 8 * 8;
    for (int r = 0; r < u.n_rows; ++r)
        for (int64_t o = u.o0; o < u.o1; ++o) {
            const float* b = u.b + o * rank;
            __m256 acc = _mm256_setzero_ps();
            int64_t c = 0;
            for (; c < full; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(b + c), _mm256_loadu_ps(u.h[r] + c), acc);
            if (c < rank) acc = _mm256_fmadd_ps(load_tail(b + c, rank - c), load_tail(u.h[r] + c, rank - c), acc);
            // y + scale * sum, as one fused step in the vector unit's rounding.
            const __m128 y = _mm_set_ss(u.y[r][o]);
            u.y[r][o] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(u.scale), _mm_set_ss(reduce8(acc)), y));
        }
}

}  // namespace pagoda::backend::cpu_impl
