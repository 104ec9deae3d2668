#version 450
// out[t][r] = sum_c w[row0 + r][c] * x[t][c] for up to 8 tokens: one invocation per weight row,
// each weight element read once for every token of the step. The sum runs over c in order, one fma
// per term, exactly as in matmul_gemm.comp: a token's outputs do not depend on which kernel ran or
// on the other tokens (batch invariance). x is staged in shared memory a chunk of columns at a time.
// SILU_MUL (matmul_silu_mul): the weight is gate rows then as many up rows; each invocation sums
// gate row r and up row rows + r (each as the plain matmul sums it) and writes silu(g) * u, the
// pointwise silu_mul's expression: bitwise the unfused matmul ; silu_mul, in one dispatch.
#include "common.glsl"
#include "weight.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint SILU_MUL = 0;
const uint MAX_TOKENS = 8;
layout(push_constant) uniform Push {
    uint64_t w, groups, x, out_;
    uint64_t range;  // unused here (matmul_gemm.comp reads a device-side token range; GEMV never does)
    uint64_t bias;   // nonzero: out[t][r] = sum + bias[r] (the add_bias op's one add)
    uint rows, row0, cols, n;
} pc;
shared float xs[MAX_TOKENS * 256];  // MAX_TOKENS x WG (WG <= 256)

void main() {
    const uint r = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    const bool in_range = r < pc.rows;
    float acc[MAX_TOKENS], acc_up[MAX_TOKENS];
    for (uint t = 0; t < MAX_TOKENS; ++t) acc[t] = acc_up[t] = 0.0;
    Floats x = Floats(pc.x);
    const uint wrow = (pc.row0 + (in_range ? r : 0u)) * pc.cols, up_row = wrow + pc.rows * pc.cols;
    for (uint c0 = 0; c0 < pc.cols; c0 += WG) {
        const uint len = min(WG, pc.cols - c0);
        for (uint t = 0; t < pc.n; ++t) {
            const uint c = c0 + gl_LocalInvocationID.x;
            xs[t * WG + gl_LocalInvocationID.x] = c < pc.cols ? x.v[t * pc.cols + c] : 0.0;
        }
        barrier();
        if (in_range)
            for (uint k = 0; k < len; ++k) {
                const float wv = weight_at(pc.w, pc.groups, wrow + c0 + k);
                for (uint t = 0; t < pc.n; ++t) acc[t] = fma(wv, xs[t * WG + k], acc[t]);
                if (SILU_MUL != 0u) {
                    const float uv = weight_at(pc.w, pc.groups, up_row + c0 + k);
                    for (uint t = 0; t < pc.n; ++t) acc_up[t] = fma(uv, xs[t * WG + k], acc_up[t]);
                }
            }
        barrier();
    }
    if (!in_range) return;
    Floats out_ = Floats(pc.out_);
    if (SILU_MUL != 0u) {
        for (uint t = 0; t < pc.n; ++t) out_.v[t * pc.rows + r] = acc[t] / (1.0 + exp(-acc[t])) * acc_up[t];
        return;
    }
    const float b = pc.bias != 0ul ? Floats(pc.bias).v[r] : 0.0;
    for (uint t = 0; t < pc.n; ++t) out_.v[t * pc.rows + r] = pc.bias != 0ul ? acc[t] + b : acc[t];
}
