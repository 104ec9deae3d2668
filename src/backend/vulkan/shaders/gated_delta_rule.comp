#version 450
// backend::GatedDeltaRule: workgroup (h, y) runs value head h of the sequence whose first token in
// the call is y (a workgroup whose token y is not its slot's first exits), over that sequence's
// tokens in order. Invocation i owns the state's value columns j = i, i + 64, ...: S[.][j] is read
// and written by it alone, in device memory. Per token the workgroup normalises q and k into shared
// memory (ggml_l2_norm's form: a / max(|a|, eps), the squares summed in a fixed order), then each
// invocation decays its columns, computes its delta from S^T kn, adds kn delta^T and reads out S^T qn.
#include "common.glsl"
#define WG 64u
#define MAX_DIM 256u
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint64_t q, k, v, g, beta, state, out_, rows;
    uint tokens, n_k_heads, n_v_heads, head_dim;
    float scale, l2_eps;
} pc;

shared float qn[MAX_DIM], kn[MAX_DIM], partial_q[WG], partial_k[WG];

void main() {
    const uint h = gl_WorkGroupID.x, first = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    Ints rows = Ints(pc.rows);
    const int slot = rows.v[first];
    for (uint t = 0u; t < first; ++t)
        if (rows.v[t] == slot) return;  // uniform over the workgroup: before any barrier
    Floats q = Floats(pc.q), k = Floats(pc.k), v = Floats(pc.v), g = Floats(pc.g), beta = Floats(pc.beta),
           state = Floats(pc.state), out_ = Floats(pc.out_);
    const uint d = pc.head_dim, hv = pc.n_v_heads, hk = pc.n_k_heads, kh = h % hk;
    const uint s = (uint(slot) * hv + h) * d * d;
    for (uint t = first; t < pc.tokens; ++t) {
        if (rows.v[t] != slot) continue;
        const uint qk = (t * hk + kh) * d;
        float sq = 0.0, sk = 0.0;
        for (uint i = lid; i < d; i += WG) {
            const float a = q.v[qk + i], b = k.v[qk + i];
            sq += a * a;
            sk += b * b;
        }
        barrier();  // the previous token's readers of qn / kn are done
        partial_q[lid] = sq;
        partial_k[lid] = sk;
        barrier();
        for (uint stride = WG / 2u; stride > 0u; stride /= 2u) {
            if (lid < stride) {
                partial_q[lid] += partial_q[lid + stride];
                partial_k[lid] += partial_k[lid + stride];
            }
            barrier();
        }
        const float fq = pc.scale / max(sqrt(partial_q[0]), pc.l2_eps), fk = 1.0 / max(sqrt(partial_k[0]), pc.l2_eps);
        for (uint i = lid; i < d; i += WG) {
            qn[i] = q.v[qk + i] * fq;
            kn[i] = k.v[qk + i] * fk;
        }
        barrier();
        const float decay = exp(g.v[t * hv + h]), b = beta.v[t * hv + h];
        const uint vo = (t * hv + h) * d;
        for (uint j = lid; j < d; j += WG) {
            float acc = 0.0;
            for (uint i = 0u; i < d; ++i) {
                const float sij = state.v[s + i * d + j] * decay;
                state.v[s + i * d + j] = sij;
                acc += sij * kn[i];
            }
            const float delta = b * (v.v[vo + j] - acc);
            acc = 0.0;
            for (uint i = 0u; i < d; ++i) {
                const float sij = state.v[s + i * d + j] + kn[i] * delta;
                state.v[s + i * d + j] = sij;
                acc += sij * qn[i];
            }
            out_.v[vo + j] = acc;
        }
    }
}
