#version 450
// out[t][r] = sum_c w[row0 + r][c] * x[t][c] for many tokens: a 32 x 32 tile of (token, row)
// outputs per workgroup of 16 x 16 invocations, each owning 2 x 2 outputs; x and the weight are
// staged (the weight dequantised) in shared memory BK columns at a time. Each output is summed over
// c in order, one fma per term, exactly as in matmul_gemv.comp (batch invariance). SILU_MUL
// (matmul_silu_mul): the weight is gate rows then as many up rows; a third tile stages the up rows,
// and each output is silu(g) * u of its two sums, as matmul_gemv.comp's (bitwise the unfused pair).
#include "common.glsl"
#include "weight.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint BK = 16;  // columns per stage; sized from the shared memory
layout(constant_id = 1) const uint SILU_MUL = 0;
const uint BM = 32, BN = 32;
layout(push_constant) uniform Push {
    uint64_t w, groups, x, out_;
    uint64_t range;  // nonzero: (first, n) of the tokens, read here (the MoE's device routing); else 0, n
    uint64_t bias;   // nonzero: out[t][r] = sum + bias[r] (the add_bias op's one add)
    uint rows, row0, cols, n;
} pc;
shared float xs[BM * BK];
shared float ws[BN * BK];
shared float us[SILU_MUL != 0u ? BN * BK : 1u];  // the up rows' tile (SILU_MUL only)

void main() {
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y, lid = ly * 16u + lx;
    const uint t0 = gl_WorkGroupID.y * BM, r0 = gl_WorkGroupID.x * BN;
    float acc[2][2] = {{0.0, 0.0}, {0.0, 0.0}}, acc_up[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
    uint n = pc.n;
    uint64_t x_at = pc.x, out_at = pc.out_;
    if (pc.range != 0ul) {
        const uint first = Uints(pc.range).v[0];
        n = Uints(pc.range).v[1];
        x_at += uint64_t(first) * pc.cols * 4u;
        out_at += uint64_t(first) * pc.rows * 4u;
    }
    Floats x = Floats(x_at);
    for (uint c0 = 0; c0 < pc.cols; c0 += BK) {
        const uint len = min(BK, pc.cols - c0);
        for (uint i = lid; i < BM * BK; i += 256u) {
            const uint t = t0 + i / BK, c = c0 + i % BK;
            xs[i] = (t < n && c < pc.cols) ? x.v[t * pc.cols + c] : 0.0;
            const uint r = r0 + i / BK;
            ws[i] = (r < pc.rows && c < pc.cols) ? weight_at(pc.w, pc.groups, (pc.row0 + r) * pc.cols + c) : 0.0;
            if (SILU_MUL != 0u)
                us[i] = (r < pc.rows && c < pc.cols) ? weight_at(pc.w, pc.groups, (pc.row0 + pc.rows + r) * pc.cols + c) : 0.0;
        }
        barrier();
        for (uint k = 0; k < len; ++k)
            for (uint i = 0; i < 2u; ++i)
                for (uint j = 0; j < 2u; ++j) {
                    acc[i][j] = fma(ws[(lx + 16u * j) * BK + k], xs[(ly + 16u * i) * BK + k], acc[i][j]);
                    if (SILU_MUL != 0u) acc_up[i][j] = fma(us[(lx + 16u * j) * BK + k], xs[(ly + 16u * i) * BK + k], acc_up[i][j]);
                }
        barrier();
    }
    Floats out_ = Floats(out_at);
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j) {
            const uint t = t0 + ly + 16u * i, r = r0 + lx + 16u * j;
            if (t >= n || r >= pc.rows) continue;
            const float g = acc[i][j];
            if (SILU_MUL != 0u) out_.v[t * pc.rows + r] = g / (1.0 + exp(-g)) * acc_up[i][j];
            else out_.v[t * pc.rows + r] = pc.bias != 0ul ? acc[i][j] + Floats(pc.bias).v[r] : acc[i][j];
        }
}
