#version 450
// Element-wise ops over n elements (rows of `cols`), one invocation each, chosen by `op`:
//   0 add:      a += b            1 add_bias: a[t][c] += b[c]
//   2 silu_mul: out = silu(a) * b 3 gelu_mul: out = gelu_tanh(a) * b
//   4 scale:    a *= f            5 softcap:  a = f * tanh(a / f)
//   6 gelu:     a = a/2 (1 + erf(a / sqrt 2)), erf by Abramowitz & Stegun 7.1.26 as the CPU computes it
//               (erfc directly for negative a: no cancellation in the tail)
//   7 swiglu_oai: out = g' sigmoid(1.702 g') (u' + 1), g' = min(a, 7), u' = clamp(b, -7, 7) (gpt-oss's experts)
//   8 sigmoid_mul: out = b / (1 + exp(-a)) (qwen35's attention output gate, as the CPU computes it)
//   9 silu_mul of halves: out[t][c] = silu(g) * u, g = a[t][c] and u = a[t][cols + c] for a of rows of
//               2 cols (a fused gate|up matmul's scratch, vulkan_fused_lora.h): op 2's expression
//  10 attn_temperature: a[t][c] *= 1 + f ln(1 + floor(pos[t] / i)), b the step's positions (int per row;
//               a padding row's is 0, factor 1), f beta, i the length (Llama 4's attention temperature)
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t a, b, out_;
    uint n, cols, op;
    float f;
    uint i, pad;
} pc;

void main() {
    const uint i = flat_invocation(256u);
    if (i >= pc.n) return;
    Floats a = Floats(pc.a), b = Floats(pc.b), out_ = Floats(pc.out_);
    if (pc.op == 9u) {
        const uint row = (i / pc.cols) * 2u * pc.cols + i % pc.cols;
        const float gate = a.v[row];
        out_.v[i] = gate / (1.0 + exp(-gate)) * a.v[row + pc.cols];
        return;
    }
    const float g = a.v[i];
    if (pc.op == 0u) a.v[i] = g + b.v[i];
    else if (pc.op == 1u) a.v[i] = g + b.v[i % pc.cols];
    else if (pc.op == 2u) out_.v[i] = g / (1.0 + exp(-g)) * b.v[i];
    else if (pc.op == 3u) {
        const float inner = 0.7978845608028654 * (g + 0.044715 * g * g * g);
        out_.v[i] = 0.5 * g * (1.0 + safe_tanh(inner)) * b.v[i];
    } else if (pc.op == 4u) a.v[i] = g * pc.f;
    else if (pc.op == 5u) a.v[i] = pc.f * safe_tanh(g / pc.f);
    else if (pc.op == 6u) {
        const float z = abs(g) * 0.7071067811865476, t = 1.0 / (1.0 + 0.3275911 * z);
        const float erfc_z =
            t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * exp(-z * z);
        a.v[i] = 0.5 * g * (g < 0.0 ? erfc_z : 2.0 - erfc_z);
    } else if (pc.op == 7u) {
        const float ga = min(g, 7.0), ub = clamp(b.v[i], -7.0, 7.0);
        out_.v[i] = ga / (1.0 + exp(-1.702 * ga)) * (ub + 1.0);
    } else if (pc.op == 8u) out_.v[i] = b.v[i] / (1.0 + exp(-g));
    else if (pc.op == 10u) {
        const uint steps = uint(Ints(pc.b).v[i / pc.cols]) / pc.i;
        a.v[i] = g * (1.0 + pc.f * log(1.0 + float(steps)));
    }
}
