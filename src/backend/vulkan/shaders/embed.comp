#version 450
// out[t][c] = row tokens[t] of the table, dequantised; with `add`, out[t][c] += it instead (learned
// position embeddings: `tokens` is then the step's positions). One invocation per output element.
#include "common.glsl"
#include "weight.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t table, groups, tokens, out_;
    uint n, cols, add;
} pc;

void main() {
    const uint i = flat_invocation(256u);
    if (i >= pc.n * pc.cols) return;
    const uint t = i / pc.cols, c = i % pc.cols;
    const uint row = uint(Ints(pc.tokens).v[t]);
    const float v = weight_at(pc.table, pc.groups, row * pc.cols + c);
    Floats(pc.out_).v[i] = pc.add != 0u ? Floats(pc.out_).v[i] + v : v;
}
