#version 450
// Each row in place: one workgroup per row; max and sum by fixed-order trees in shared memory.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(push_constant) uniform Push {
    uint64_t x;
    uint cols, rows;
} pc;
shared float part[256];

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, lid = gl_LocalInvocationID.x;
    if (row >= pc.rows) return;  // uniform across the workgroup
    Floats x = Floats(pc.x);
    const uint base = row * pc.cols;
    float m = -1.0 / 0.0;
    for (uint c = lid; c < pc.cols; c += WG) m = max(m, x.v[base + c]);
    part[lid] = m;
    barrier();
    for (uint h = WG / 2u; h > 0u; h /= 2u) {
        if (lid < h) part[lid] = max(part[lid], part[lid + h]);
        barrier();
    }
    m = part[0];
    barrier();
    float s = 0.0;
    for (uint c = lid; c < pc.cols; c += WG) {
        const float e = exp(x.v[base + c] - m);
        x.v[base + c] = e;
        s += e;
    }
    part[lid] = s;
    barrier();
    for (uint h = WG / 2u; h > 0u; h /= 2u) {
        if (lid < h) part[lid] += part[lid + h];
        barrier();
    }
    const float inv = 1.0 / part[0];
    for (uint c = lid; c < pc.cols; c += WG) x.v[base + c] *= inv;
}
