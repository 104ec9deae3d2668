#version 450
// out[t] = (x[t] - mean) / sqrt(var + eps) * w + b (the encoders' LayerNorm): one workgroup per row;
// the mean, then the sum of squared deviations, each strided partial sums then a fixed-order tree in
// shared memory (a row's result depends only on it). out may be x.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(push_constant) uniform Push {
    uint64_t x, w, b, out_;
    uint cols, rows;
    float eps;
} pc;
shared float part[256];

float row_sum(float s, uint lid) {
    part[lid] = s;
    barrier();
    for (uint half_ = WG / 2u; half_ > 0u; half_ /= 2u) {
        if (lid < half_) part[lid] += part[lid + half_];
        barrier();
    }
    const float total = part[0];
    barrier();  // part is reused by the next sum
    return total;
}

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, lid = gl_LocalInvocationID.x;
    if (row >= pc.rows) return;  // uniform across the workgroup
    Floats x = Floats(pc.x), w = Floats(pc.w), b = Floats(pc.b), out_ = Floats(pc.out_);
    const uint base = row * pc.cols;
    float s = 0.0;
    for (uint c = lid; c < pc.cols; c += WG) s += x.v[base + c];
    const float mean = row_sum(s, lid) / float(pc.cols);
    s = 0.0;
    for (uint c = lid; c < pc.cols; c += WG) {
        const float d = x.v[base + c] - mean;
        s = fma(d, d, s);
    }
    const float inv = 1.0 / sqrt(row_sum(s, lid) / float(pc.cols) + pc.eps);
    for (uint c = lid; c < pc.cols; c += WG) out_.v[base + c] = (x.v[base + c] - mean) * inv * w.v[c] + b.v[c];
}
