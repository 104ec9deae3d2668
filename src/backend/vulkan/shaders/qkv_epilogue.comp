#version 450
// qkv_rope_kv_write's middle pass: s holds each token's Q | K | V outputs of one matmul over the
// three parts (n x cols, cols = q_cols + 2 kv_cols). One invocation per (token, column): the bias
// (when given), then for Q and K the rotary pair of rope.comp (the same expressions on the same
// biased values), into q_out, k and v (contiguous n x q_cols / kv_cols, the K/V write's input).
// Every output is bitwise what add_bias ; rope computes.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t s, q_out, k, v, bias_q, bias_k, bias_v, table;  // biases: all 0 or all given
    uint n, q_cols, kv_cols, head_dim, half_, neox;
} pc;

float biased(uint t, uint c, uint cols, Floats bias, bool has_bias, uint at) {
    const float x = Floats(pc.s).v[t * cols + at + c];
    return has_bias ? x + bias.v[c] : x;
}

void main() {
    const uint cols = pc.q_cols + 2u * pc.kv_cols, i = flat_invocation(256u);
    if (i >= pc.n * cols) return;
    const uint t = i / cols, col = i % cols;
    const bool has_bias = pc.bias_q != 0ul;
    const uint part = col < pc.q_cols ? 0u : (col < pc.q_cols + pc.kv_cols ? 1u : 2u);
    const uint at = part == 0u ? 0u : (part == 1u ? pc.q_cols : pc.q_cols + pc.kv_cols);
    const uint c = col - at, width = part == 0u ? pc.q_cols : pc.kv_cols;
    Floats bias = Floats(part == 0u ? pc.bias_q : (part == 1u ? pc.bias_k : pc.bias_v));
    float y = biased(t, c, cols, bias, has_bias, at);
    const uint d = c % pc.head_dim, head0 = c - d;
    if (part < 2u && pc.half_ > 0u) {
        // The rotated pair (a, b) this element belongs to (the first 2 half of the head's values):
        // neox pairs p with p + half, otherwise 2p with 2p + 1.
        if (d < 2u * pc.half_) {
            const uint p = pc.neox != 0u ? (d < pc.half_ ? d : d - pc.half_) : d / 2u;
            const bool is_a = pc.neox != 0u ? d < pc.half_ : (d & 1u) == 0u;
            const uint a = head0 + (pc.neox != 0u ? p : 2u * p), b = head0 + (pc.neox != 0u ? p + pc.half_ : 2u * p + 1u);
            const float x0 = biased(t, a, cols, bias, has_bias, at), x1 = biased(t, b, cols, bias, has_bias, at);
            Floats tab = Floats(pc.table);
            const float cs = tab.v[t * pc.half_ + p], sn = tab.v[pc.n * pc.half_ + t * pc.half_ + p];
            y = is_a ? x0 * cs - x1 * sn : x0 * sn + x1 * cs;
        }
    }
    Floats dst = Floats(part == 0u ? pc.q_out : (part == 1u ? pc.k : pc.v));
    dst.v[t * width + c] = y;
}
