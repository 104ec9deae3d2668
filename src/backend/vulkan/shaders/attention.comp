#version 450
// Causal paged attention, one workgroup per (query head, token): keys of the token's sequence at
// positions start..position (start > 0 under a sliding window; non-causal attention hands every token
// its sequence's last position of the step in `positions`), found through its block table, in
// chunks of WG keys with an online softmax. `positions` holds each token's last key (its position, or
// its attend_until: an image's rows read to the image's end). With `sinks` (nonzero: one logit per
// query head, gpt-oss) the softmax starts from the sink as a key with no value: m = sink, l = 1, so
// it joins the denominator and never overflows. Scores: q . k (in order over head_dim) * scale, then the
// soft cap; chunk max and sum by workgroup reductions (reduce.glsl: fixed-order trees, or subgroup
// operations in the _subgroup module); each output element accumulates the chunk's keys
// in order. Nothing depends on the other tokens of the step (batch invariance).
// ALiBi (alibi_max_bias > 0, jina-bert-v2): each score, after the scale and the cap, gets
// -slope_h |pos_q - pos_k| (slope_h as backend/alibi.h, in float), pos_q the query's own position,
// which `seq_index` holds after its sequence (per token: sequence, position, span start). Under a
// sliding window the keys start at max(0, min(position - window + 1, span start)): an image's rows
// reach back to the image's start (backend/attention_span.h).
// Split-KV (flash decoding, `partials` nonzero): a token's keys start..position are cut into
// split_count() ranges of whole WG-key chunks, one workgroup each (gl_WorkGroupID.z; the sink in the
// first), and each writes its unnormalised output, running max m and sum l to `partials`
// (attention_combine.comp rescales and adds them). A token's split count depends only on its own key
// count, and with one split the combine gives bitwise this shader's unsplit output.
#include "common.glsl"
#include "kv.glsl"
#include "attention_split.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;  // a power of two, 64..256
#include "reduce.glsl"
layout(push_constant) uniform Push {
    uint64_t q, out_, cache, positions, seq_index, tables, sinks;
    uint n_heads, n_kv_heads, layer_offset, table_stride, window;
    float scale, softcap;
    uint block_size, dtype, head_dim, row_bytes, head_block_bytes, layer_block_bytes, bytes_per_block;
    uint64_t partials;  // 0: write out_ directly (one split)
    uint split_keys;
    float alibi_max_bias;  // 0: no ALiBi
} pc;
const uint kMaxSplits = 16u;  // kernel_settings.h's kMaxAttentionSplits: the partials' layout

// backend/alibi.h's slope of head h of n, in float: m the largest power of two <= n.
float alibi_slope(uint h, uint n, float max_bias) {
    const uint m = 1u << findMSB(n);
    return h < m ? exp2(-max_bias * float(h + 1u) / float(m)) : exp2(-max_bias * float(2u * (h - m) + 1u) / float(2u * m));
}
shared float qs[256];
shared float ps[256];

int key_slot(int seq, int k) {
    const int block = Ints(pc.tables).v[uint(seq) * pc.table_stride + uint(k) / pc.block_size];
    return block * int(pc.block_size) + int(uint(k) % pc.block_size);
}

void main() {
    const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    const uint kvh = head / (pc.n_heads / pc.n_kv_heads);
    KvGeometry g = KvGeometry(pc.block_size, pc.dtype, pc.head_dim, pc.row_bytes, pc.head_block_bytes,
                              pc.layer_block_bytes, pc.bytes_per_block);
    const int end = Ints(pc.positions).v[t], seq = Ints(pc.seq_index).v[3u * t], qpos = Ints(pc.seq_index).v[3u * t + 1u];
    const float slope = pc.alibi_max_bias > 0.0 ? alibi_slope(head, pc.n_heads, pc.alibi_max_bias) : 0.0;
    // A window counts back from the row's own position, or to its image's start (attention_span.h).
    const int start = pc.window > 0u ? max(0, min(qpos - int(pc.window) + 1, Ints(pc.seq_index).v[3u * t + 2u])) : 0;
    const uint split = gl_WorkGroupID.z;
    const uint n_splits = pc.partials != 0ul ? split_count(uint(end - start + 1), pc.split_keys, kMaxSplits) : 1u;
    if (split >= n_splits) return;  // uniform across the workgroup
    const int chunk = split_chunk(uint(end - start + 1), n_splits, WG);
    const int first = start + int(split) * chunk, pos = min(end, first + chunk - 1);  // pos < first: an empty split
    const uint qbase = (t * pc.n_heads + head) * pc.head_dim;
    for (uint d = lid; d < pc.head_dim; d += WG) qs[d] = Floats(pc.q).v[qbase + d];
    barrier();
    float m = -1.0 / 0.0, l = 0.0;
    if (pc.sinks != 0ul && split == 0u) {
        m = Floats(pc.sinks).v[head];
        l = 1.0;
    }
    float acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (int k0 = first; k0 <= pos; k0 += int(WG)) {
        const int k = k0 + int(lid);
        float s = -1.0 / 0.0;
        if (k <= pos) {
            const uint64_t row = kv_row_address(pc.cache, g, pc.layer_offset, key_slot(seq, k), kvh, false);
            const float rs = kv_row_scale(row, pc.dtype, pc.head_dim);
            float dot = 0.0;
            for (uint d = 0; d < pc.head_dim; ++d) dot = fma(qs[d], kv_load(row, pc.dtype, d, rs), dot);
            s = dot * pc.scale;
            if (pc.softcap > 0.0) s = pc.softcap * safe_tanh(s / pc.softcap);
            if (pc.alibi_max_bias > 0.0) s -= slope * float(abs(qpos - k));
        }
        const float m_new = max(m, workgroup_reduce(s, true));
        const float p = k <= pos ? exp(s - m_new) : 0.0;
        ps[lid] = p;
        const float chunk_sum = workgroup_reduce(p, false);  // its barriers also publish ps
        const float corr = exp(m - m_new);
        l = l * corr + chunk_sum;
        const int len = min(int(WG), pos + 1 - k0);
        for (uint i = 0; i < 4u; ++i) {
            const uint d = lid + i * WG;
            if (d >= pc.head_dim) break;
            float a = acc[i] * corr;
            for (int j = 0; j < len; ++j) {
                const uint64_t row = kv_row_address(pc.cache, g, pc.layer_offset, key_slot(seq, k0 + j), kvh, true);
                a = fma(ps[j], kv_load(row, pc.dtype, d, kv_row_scale(row, pc.dtype, pc.head_dim)), a);
            }
            acc[i] = a;
        }
        m = m_new;
        barrier();
    }
    if (pc.partials != 0ul) {
        Floats part = Floats(pc.partials);
        const uint at = partial_offset(t, head, split, pc.n_heads, kMaxSplits, pc.head_dim);
        for (uint i = 0; i < 4u; ++i) {
            const uint d = lid + i * WG;
            if (d < pc.head_dim) part.v[at + d] = acc[i];
        }
        if (lid == 0u) {
            part.v[at + pc.head_dim] = m;
            part.v[at + pc.head_dim + 1u] = l;
        }
        return;
    }
    for (uint i = 0; i < 4u; ++i) {
        const uint d = lid + i * WG;
        if (d < pc.head_dim) Floats(pc.out_).v[qbase + d] = acc[i] / l;
    }
}
