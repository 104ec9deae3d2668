#version 450
// Rotary embedding in place: pair i of head h of token t rotates by the angle whose cosine and sine
// the host computed in double for the token's position (table: [t][i] cosines, then [t][i] sines).
// neox pairs i with i + half, otherwise 2i with 2i + 1.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t x, table;
    uint n, n_heads, head_dim, half_, cols, neox;
} pc;

void main() {
    const uint i = flat_invocation(256u);
    if (i >= pc.n * pc.n_heads * pc.half_) return;
    const uint p = i % pc.half_, h = (i / pc.half_) % pc.n_heads, t = i / (pc.half_ * pc.n_heads);
    Floats x = Floats(pc.x), tab = Floats(pc.table);
    const float c = tab.v[t * pc.half_ + p], s = tab.v[pc.n * pc.half_ + t * pc.half_ + p];
    const uint base = t * pc.cols + h * pc.head_dim;
    const uint a = base + (pc.neox != 0u ? p : 2u * p), b = base + (pc.neox != 0u ? p + pc.half_ : 2u * p + 1u);
    const float x0 = x.v[a], x1 = x.v[b];
    x.v[a] = x0 * c - x1 * s;
    x.v[b] = x0 * s + x1 * c;
}
