#version 450
// Backend::lora_add, one segment: for each of its rows t, y[t] += scale * B (A x[t]), A: rank x in,
// B: out x rank (f32, row-major); y's rows are y_stride floats apart (a part of a fused op's wider
// scratch rows, vulkan_fused_lora.h; cols_out for a plain tensor). One workgroup per row: h = A x[t] into shared memory (h[k] one
// invocation's sum over the columns in order), then each output's sum over k in order. A row's
// result depends on its x, y and the adapter only: bitwise batch-invariant.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint64_t x, y, a, b, rows;
    uint n_rows, cols_in, cols_out, rank;
    float scale;
    uint y_stride;
} pc;

const uint kMaxRank = 1024u;  // VulkanLora::kMaxRank
shared float h[kMaxRank];

void main() {
    const uint i = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (i >= pc.n_rows) return;  // whole workgroups only: no barrier is skipped by part of one
    const uint t = uint(Ints(pc.rows).v[i]);
    Floats x = Floats(pc.x), a = Floats(pc.a), b = Floats(pc.b), y = Floats(pc.y);
    const uint xrow = t * pc.cols_in;
    for (uint k = gl_LocalInvocationID.x; k < pc.rank; k += 64u) {
        float acc = 0.0;
        const uint arow = k * pc.cols_in;
        for (uint c = 0u; c < pc.cols_in; ++c) acc += a.v[arow + c] * x.v[xrow + c];
        h[k] = acc;
    }
    barrier();
    const uint yrow = t * pc.y_stride;
    for (uint o = gl_LocalInvocationID.x; o < pc.cols_out; o += 64u) {
        float acc = 0.0;
        const uint brow = o * pc.rank;
        for (uint k = 0u; k < pc.rank; ++k) acc += b.v[brow + k] * h[k];
        y.v[yrow + o] = y.v[yrow + o] + pc.scale * acc;
    }
}
