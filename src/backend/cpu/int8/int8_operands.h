// Internal: the operands of the int8 matmul method, shared by its scalar / AVX2 / AVX-512 kernels.
//
// Activations: each token's row is quantised per 32 values: d = max|x| / 127, q = round-to-nearest-even
// (x * 127 / max|x|) in -127..127, and for each half of 16 values s = d * sum(q) (f32). Every path uses
// this one scalar routine, so a token's quantisation never depends on the batch.
//
// For the portable kernel, weights are decoded one row at a time into a uniform form: for every 32-value block b, 32 unsigned
// bytes u (0..255) and, per 16-value half h, a scale sw and an offset mh with w_i = sw_h * u_i + mh_h,
// so that over half h:  sum_i w_i x_i  ~=  sw_h * d_b * sum_i u_i q_i  +  mh_h * s_h.
// Q8_0: u = q + 128, sw = d, mh = -128 d.   Q4_0: u = nibble, sw = d, mh = -8 d.
// Q4_1: sw = d, mh = m.   Q4_K/Q5_K: sw = d*scale_j, mh = -dmin*min_j.   Q6_K: sw = d*sc, mh = -32 d*sc.
// Q5_0: u = 5-bit code, sw = d, mh = -16 d.   Q5_1: sw = d, mh = m.
// Q2_K (16-value sub-blocks = halves): u = 2-bit code, sw = d*sc_k, mh = -dmin*m_k.
// Q3_K: u = 3-bit code (low bits | hmask bit << 2), sw = d*(sc_k - 32), mh = -4 sw.
// Codebook types (IQ*, MXFP4; quant/codebook_blocks.h): u = int8 code + o (o: the type's largest |code|),
// sw = its half's scale, mh = -o sw.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/ggml_types.h"

namespace pagoda::backend::cpu::detail {

struct QuantizedActivations {
    int64_t n_tokens = 0, cols = 0, n_blocks = 0;
    std::vector<int8_t> q;    // [n_tokens][cols]
    std::vector<float> d;     // [n_tokens][n_blocks]
    std::vector<float> s;     // [n_tokens][2 * n_blocks]
};

void quantize_activations(const float* x, int64_t n_tokens, int64_t cols, QuantizedActivations& out,
                          ThreadPool& pool);

// Decodes a whole weight row (cols values) of a block type into u[cols], sw[2*nb], mh[2*nb].
void decode_weight_row(gguf::GgmlType type, const uint8_t* row, int64_t cols, uint8_t* u, float* sw, float* mh);

}  // namespace pagoda::backend::cpu::detail
