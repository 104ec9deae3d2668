// Internal: activations rounded to bf16 once per matmul call, for the bf16 dot kernel
// (matmul_bf16_avx512.cpp) and the AMX bf16 tiles (amx_bf16_kernel.h), which read the same rows:
// token t's column pair j is the dword at x[t * stride + j] (low half: column 2j), zero past the
// columns; stride is the pairs rounded up to 16 (a 64-byte aligned row, and whole K tiles of the AMX
// kernel). Rounding: bf16_round.h. Include only from TUs compiled with the AVX-512 flags.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "backend/cpu/simd/bf16_round.h"

namespace pagoda::backend::cpu::detail {

struct Bf16Rows {
    const uint32_t* x = nullptr;
    int64_t stride = 0;   // dwords per token, a multiple of 16
    int64_t n_pairs = 0;  // (cols + 1) / 2
};

// Columns c .. c + 31 of a row of `cols` values as 16 dwords of bf16 pairs (zero past the columns).
inline __m512i round_bf16_chunk(const float* src, int64_t cols, int64_t c) {
    const int64_t left = cols - c;
    const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : left <= 0 ? 0 : __mmask16((1u << left) - 1);
    const __mmask16 m1 = left >= 32 ? __mmask16(0xffff) : left <= 16 ? 0 : __mmask16((1u << (left - 16)) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(m0, src + std::min(c, cols));
    const __m512 hi = _mm512_maskz_loadu_ps(m1, src + std::min(c + 16, cols));
    return bf16_round_pairs(lo, hi);
}

inline void round_bf16_row(const float* src, int64_t cols, uint32_t* dst, int64_t stride) {
    for (int64_t c = 0; c < 2 * stride; c += 32) _mm512_store_si512(dst + c / 2, round_bf16_chunk(src, cols, c));
}

// Rows of n_tokens tokens in `buf` (grown as needed); large steps split the tokens over the pool.
inline Bf16Rows round_bf16_rows(const float* x, int64_t n_tokens, int64_t cols, AlignedBuffer<uint32_t>& buf,
                                ThreadPool& pool) {
    Bf16Rows a;
    a.n_pairs = (cols + 1) / 2;
    a.stride = (a.n_pairs + 15) / 16 * 16;
    const size_t need = size_t(n_tokens * a.stride);
    if (buf.size() < need) buf = AlignedBuffer<uint32_t>(need);
    uint32_t* out = buf.data();
    constexpr int64_t kTokensPerTask = 8;
    if (n_tokens <= kTokensPerTask) {
        for (int64_t t = 0; t < n_tokens; ++t) round_bf16_row(x + t * cols, cols, out + t * a.stride, a.stride);
    } else {
        pool.run(int((n_tokens + kTokensPerTask - 1) / kTokensPerTask), [&](int task, int) {
            const int64_t t1 = std::min<int64_t>(n_tokens, (task + 1) * kTokensPerTask);
            for (int64_t t = task * kTokensPerTask; t < t1; ++t)
                round_bf16_row(x + t * cols, cols, out + t * a.stride, a.stride);
        });
    }
    a.x = out;
    return a;
}

}  // namespace pagoda::backend::cpu::detail
