#version 450
// The last stage of a mixture-of-experts FFN (vulkan_moe.cpp), one workgroup per token t:
//   out[t][c] = sum_j weights[t k + j] * y[slots[t k + j]][c]  (j = 0..k-1, in rank order, one fma each)
//             + s_t * shared_y[t][c]                         (when shared_y is nonzero)
// s_t = sigmoid(shared_gate . x[t]) with a shared gate (its dot by a fixed-order tree), else 1. Every
// value read is the token's own, so a row never depends on the other tokens (batch invariance).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t y, weights, slots, shared_y, shared_gate, x, out_;
    uint n, k, dim;
} pc;
shared float red[256];

void main() {
    const uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, lid = gl_LocalInvocationID.x;
    if (t >= pc.n) return;  // the whole workgroup: t is uniform
    float s = 1.0;
    if (pc.shared_gate != 0ul) {
        float part = 0.0;
        for (uint c = lid; c < pc.dim; c += 256u) part = fma(Floats(pc.shared_gate).v[c], Floats(pc.x).v[t * pc.dim + c], part);
        red[lid] = part;
        barrier();
        for (uint h = 128u; h > 0u; h /= 2u) {
            if (lid < h) red[lid] += red[lid + h];
            barrier();
        }
        s = 1.0 / (1.0 + exp(-red[0]));
    }
    for (uint c = lid; c < pc.dim; c += 256u) {
        float acc = 0.0;
        for (uint j = 0; j < pc.k; ++j) {
            const uint slot = uint(Ints(pc.slots).v[t * pc.k + j]);
            acc = fma(Floats(pc.weights).v[t * pc.k + j], Floats(pc.y).v[slot * pc.dim + c], acc);
        }
        if (pc.shared_y != 0ul) acc = fma(s, Floats(pc.shared_y).v[t * pc.dim + c], acc);
        Floats(pc.out_).v[t * pc.dim + c] = acc;
    }
}
