// Internal: the gated delta rule (op_params.h: GatedDeltaRule) over a chunk of consecutive tokens of
// one value head and one state, in the chunkwise-parallel form (the gated DeltaNet paper's; the
// token-by-token recurrence in recurrent.cpp is its unfused twin and oracle). With G the running sum
// of the log decays over the chunk, the new values D (d_t = beta_t (v_t - S_{t-1}^T k_t) after the
// decay) solve the unit lower-triangular system
//   d_t + sum_{s<t} beta_t e^{G_t - G_s} (k_t.k_s) d_s = beta_t (v_t - e^{G_t} S_0^T k_t)
// by forward substitution, then
//   out_t = e^{G_t} S_0^T q_t + sum_{s<=t} e^{G_t - G_s} (q_t.k_s) d_s,
//   S <- e^{G_n} S_0 + sum_s e^{G_n - G_s} k_s d_s^T.
// Only decays e^{G_t - G_s} with t >= s appear: nothing overflows however strong the decay. The
// products run as small matrix products (about 3 n d^2 + 1.5 n^2 d multiply-adds per chunk) instead of the
// token form's two passes over the d x d state per token.
#pragma once
#include <cstdint>

namespace pagoda::backend::cpu::detail {

// The most tokens one chunk holds: its n x n matrices stay in L1/L2 beside the d x d state.
inline constexpr int64_t kDeltaChunk = 64;

// One chunk of n <= kDeltaChunk tokens of one head of size d, all rows contiguous:
// q, k (n x d) already l2-normalised (q times the op's scale), v (n x d), g and beta (n), state
// (d x d, row i = key i, column j = value j) updated in place, out (n x d) written.
struct DeltaChunk {
    int64_t n = 0, d = 0;
    const float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
    float* state = nullptr;
    float* out = nullptr;
};

}  // namespace pagoda::backend::cpu::detail
