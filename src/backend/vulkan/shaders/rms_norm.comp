#version 450
// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w: one workgroup per row; the sum of squares is
// strided partial sums then one workgroup reduction (reduce.glsl: a fixed-order shared-memory tree,
// or subgroupAdd): a row's result depends only on it. With a residual r (add_rms_norm), x[t] += r[t]
// first, written back, and the norm is of the sum: the same additions as the add op then rms_norm,
// so the fused op is bitwise its unfused pair.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
#include "reduce.glsl"
layout(push_constant) uniform Push {
    uint64_t x, w, out_, r;  // r: 0, or the residual added to x first
    uint cols, rows;
    float eps;
} pc;

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, lid = gl_LocalInvocationID.x;
    if (row >= pc.rows) return;  // uniform across the workgroup
    Floats x = Floats(pc.x), w = Floats(pc.w), out_ = Floats(pc.out_), r = Floats(pc.r);
    const uint base = row * pc.cols;
    float s = 0.0;
    for (uint c = lid; c < pc.cols; c += WG) {
        float v = x.v[base + c];
        if (pc.r != 0ul) {
            v = v + r.v[base + c];
            x.v[base + c] = v;  // read back below by this same invocation
        }
        s = fma(v, v, s);
    }
    const float inv = 1.0 / sqrt(workgroup_reduce(s, false) / float(pc.cols) + pc.eps);
    for (uint c = lid; c < pc.cols; c += WG) out_.v[base + c] = x.v[base + c] * inv * w.v[c];
}
