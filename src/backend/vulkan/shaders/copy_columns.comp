#version 450
// backend::ColumnCopy: for every row t, head h < n_heads, j < width,
//   dst[t][h * dst_stride + dst_offset + j] = src[t][h * src_stride + src_offset + j],
// one invocation per copied element (an exact copy of the float's bits); dst's other columns are
// not touched. src_stride 0 repeats one range into every head (MLA's shared RoPE key).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t src, dst;
    uint n, n_heads, width, src_stride, src_offset, dst_stride, dst_offset, src_cols, dst_cols;
} pc;

void main() {
    const uint i = flat_invocation(256u);
    if (i >= pc.n) return;
    const uint j = i % pc.width, h = (i / pc.width) % pc.n_heads, t = i / (pc.width * pc.n_heads);
    Floats(pc.dst).v[t * pc.dst_cols + h * pc.dst_stride + pc.dst_offset + j] =
        Floats(pc.src).v[t * pc.src_cols + h * pc.src_stride + pc.src_offset + j];
}
