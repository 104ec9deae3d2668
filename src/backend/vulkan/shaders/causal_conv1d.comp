#version 450
// backend::CausalConv1d: workgroup (x, y) runs channels 64x .. 64x + 63 of the sequence whose first
// token in the call is y (a workgroup whose token y is not its slot's first exits), over that
// sequence's tokens in order. A channel's state column belongs to one invocation, so the tokens of a
// sequence need no barrier, and a sequence's results never depend on the other sequences of the call.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint64_t x, weight, state, out_, rows;
    uint tokens, channels, kernel, silu;
} pc;

void main() {
    const uint first = gl_WorkGroupID.y, c = gl_GlobalInvocationID.x;
    Ints rows = Ints(pc.rows);
    const int slot = rows.v[first];
    for (uint t = 0u; t < first; ++t)
        if (rows.v[t] == slot) return;
    if (c >= pc.channels) return;
    Floats x = Floats(pc.x), w = Floats(pc.weight), state = Floats(pc.state), out_ = Floats(pc.out_);
    const uint kept = pc.kernel - 1u, C = pc.channels, s = uint(slot) * kept * C, wc = c * pc.kernel;
    for (uint t = first; t < pc.tokens; ++t) {
        if (rows.v[t] != slot) continue;
        const float xt = x.v[t * C + c];
        float sum = w.v[wc + kept] * xt;
        for (uint j = 0u; j < kept; ++j) sum += w.v[wc + j] * state.v[s + j * C + c];
        out_.v[t * C + c] = pc.silu != 0u ? sum / (1.0 + exp(-sum)) : sum;
        for (uint j = 0u; j + 1u < kept; ++j) state.v[s + j * C + c] = state.v[s + (j + 1u) * C + c];
        state.v[s + (kept - 1u) * C + c] = xt;
    }
}
