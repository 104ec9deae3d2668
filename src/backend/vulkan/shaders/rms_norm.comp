#version 450
// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w: one workgroup per row; the sum of squares is
// strided partial sums then a fixed-order tree in shared memory (a row's result depends only on it).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(push_constant) uniform Push {
    uint64_t x, w, out_;
    uint cols, rows;
    float eps;
} pc;
shared float part[256];

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, lid = gl_LocalInvocationID.x;
    if (row >= pc.rows) return;  // uniform across the workgroup
    Floats x = Floats(pc.x), w = Floats(pc.w), out_ = Floats(pc.out_);
    const uint base = row * pc.cols;
    float s = 0.0;
    for (uint c = lid; c < pc.cols; c += WG) s = fma(x.v[base + c], x.v[base + c], s);
    part[lid] = s;
    barrier();
    for (uint half_ = WG / 2u; half_ > 0u; half_ /= 2u) {
        if (lid < half_) part[lid] += part[lid + half_];
        barrier();
    }
    const float inv = 1.0 / sqrt(part[0] / float(pc.cols) + pc.eps);
    for (uint c = lid; c < pc.cols; c += WG) out_.v[base + c] = x.v[base + c] * inv * w.v[c];
}
