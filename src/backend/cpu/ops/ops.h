// Element-wise and row-wise operators of the transformer, on f32 rows. Each operator dispatches on
// pagoda::active_isa() to an AVX-512 / AVX2 version (ops_avx512.cpp, ops_avx2.cpp) or the plain
// definition, which stays available as *_reference and is what the SIMD versions are tested against.
// SIMD results differ from the reference only by rounding: sums are accumulated in f32 lanes, and
// exp is a vectorised polynomial (relative error below 4 ulp; inputs below -87.3 give 0 and above
// 88.3 are clamped there). Tolerances are stated in tests/kernels/ops_test.cpp.
#pragma once
#include <cstdint>

namespace pagoda::backend::cpu {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]; out may alias x.
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// out[i] = silu(gate[i]) * up[i] where silu(g) = g / (1 + exp(-g)); out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu(gate[i]) * up[i] with the tanh approximation
// gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))); out may alias gate. Computed as
// g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))) with exp_f32 (so with its accuracy on SIMD paths).
void gelu_mul(const float* gate, const float* up, int64_t n, float* out);

// Encoders (encoder_ops.cpp). layer_norm: out[i] = (x[i] - mean) / sqrt(var + eps) * weight[i] +
// bias[i], mean and (population) variance accumulated in double like rms_norm; out may alias x.
// gelu: x[i] = x[i]/2 (1 + erf(x[i] / sqrt 2)) in place (the exact form, transformers' "gelu"), erf
// by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7) on exp_f32; for negative inputs erfc is
// computed directly (no 1 + erf cancellation), so the tail stays within a fraction of a percent
// (0.2 % at x = -5, where gelu is -1.4e-6) instead of losing every digit.
void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out);
void gelu_inplace(float* x, int64_t n);

// x[i] *= s (Gemma's embedding scale); x[i] = cap * tanh(x[i] / cap) (Gemma 2's logit soft cap).
// Scalar on every path: they run once per token on one row, far from the matmuls' cost.
void scale_inplace(float* x, float s, int64_t n);
void softcap_inplace(float* x, float cap, int64_t n);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// In-place softmax over n values (max-subtracted, f32).
void softmax(float* x, int64_t n);

// Rotary position embedding of one token's heads, in place. x is [n_heads][head_dim]; the first
// n_rot dimensions of each head rotate by angle pos * inv_freq[i] with cos/sin given per pair
// (cos[i], sin[i] for i < n_rot/2). `neox` pairs dimension i with i + n_rot/2 (GPT-NeoX, Qwen2);
// otherwise adjacent dimensions (2i, 2i+1) pair up (original Llama / GGML "normal").
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos, const float* sin,
          bool neox);

void rms_norm_reference(const float* x, const float* weight, int64_t n, float eps, float* out);
void silu_mul_reference(const float* gate, const float* up, int64_t n, float* out);
void add_inplace_reference(float* y, const float* x, int64_t n);
void softmax_reference(float* x, int64_t n);
void rope_reference(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos, const float* sin,
                    bool neox);

// exp of n values (out may alias x), with the accuracy stated above on SIMD paths; exposed for tests
// and for attention kernels.
void exp_f32(const float* x, int64_t n, float* out);

}  // namespace pagoda::backend::cpu
