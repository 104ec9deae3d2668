#version 450
// Each row in place: one workgroup per row; max and sum by workgroup reductions (reduce.glsl: fixed-
// order shared-memory trees, or subgroupMax/subgroupAdd), so a row's result depends only on it.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
#include "reduce.glsl"
layout(push_constant) uniform Push {
    uint64_t x;
    uint cols, rows;
} pc;

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, lid = gl_LocalInvocationID.x;
    if (row >= pc.rows) return;  // uniform across the workgroup
    Floats x = Floats(pc.x);
    const uint base = row * pc.cols;
    float m = -1.0 / 0.0;
    for (uint c = lid; c < pc.cols; c += WG) m = max(m, x.v[base + c]);
    m = workgroup_reduce(m, true);
    float s = 0.0;
    for (uint c = lid; c < pc.cols; c += WG) {
        const float e = exp(x.v[base + c] - m);
        x.v[base + c] = e;
        s += e;
    }
    const float inv = 1.0 / workgroup_reduce(s, false);
    for (uint c = lid; c < pc.cols; c += WG) x.v[base + c] *= inv;
}
