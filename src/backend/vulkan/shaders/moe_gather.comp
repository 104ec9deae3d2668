#version 450
// xg[slots[t k + j]][c] = x[t][c]: each token's row once per selected expert, in its slot (the
// slots moe_slots.comp assigned). One invocation per (t, j, c).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t x, slots, xg;
    uint n, k, dim;
} pc;

void main() {
    const uint i = flat_invocation(256u);
    if (i >= pc.n * pc.k * pc.dim) return;
    const uint c = i % pc.dim, tj = i / pc.dim, t = tj / pc.k;
    const uint slot = Uints(pc.slots).v[tj];
    Floats(pc.xg).v[slot * pc.dim + c] = Floats(pc.x).v[t * pc.dim + c];
}
