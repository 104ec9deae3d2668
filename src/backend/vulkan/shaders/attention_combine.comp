#version 450
// Split-KV attention's second pass: one workgroup per (query head, token) combines the token's
// split_count() partials of attention.comp: M = max m_s, L = sum l_s e^(m_s - M), out = sum o_s
// e^(m_s - M) / L, over s in order. With one split that is o_0 / l_0 exactly (e^0 = 1), the unsplit
// output bit for bit. Nothing depends on the other tokens of the step (batch invariance).
#include "common.glsl"
#include "attention_split.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint64_t partials, out_, positions, seq_index;  // seq_index: attention.comp's (sequence, position, span start)
    uint n_heads, head_dim, window, split_keys, max_splits, pad;
} pc;

void main() {
    const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    const int end = Ints(pc.positions).v[t];
    const int qpos = Ints(pc.seq_index).v[3u * t + 1u], from = Ints(pc.seq_index).v[3u * t + 2u];
    const int start = pc.window > 0u ? max(0, min(qpos - int(pc.window) + 1, from)) : 0;
    const uint n_splits = split_count(uint(end - start + 1), pc.split_keys, pc.max_splits);
    Floats part = Floats(pc.partials);
    const uint base = partial_offset(t, head, 0u, pc.n_heads, pc.max_splits, pc.head_dim), stride = pc.head_dim + 2u;
    float big = -1.0 / 0.0;
    for (uint s = 0; s < n_splits; ++s) big = max(big, part.v[base + s * stride + pc.head_dim]);
    float sum = 0.0;
    for (uint s = 0; s < n_splits; ++s) {
        const uint at = base + s * stride;
        sum += part.v[at + pc.head_dim + 1u] * exp(part.v[at + pc.head_dim] - big);
    }
    for (uint d = lid; d < pc.head_dim; d += 64u) {
        float o = 0.0;
        for (uint s = 0; s < n_splits; ++s) {
            const uint at = base + s * stride;
            o += part.v[at + d] * exp(part.v[at + pc.head_dim] - big);
        }
        Floats(pc.out_).v[(t * pc.n_heads + head) * pc.head_dim + d] = o / sum;
    }
}
