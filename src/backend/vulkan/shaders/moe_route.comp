#version 450
// The mixture-of-experts router on the device (vulkan_moe.cpp), one invocation per token t: from its
// router logits, the k experts ids[t k + j] (best first) and their weights[t k + j], as route_token
// (backend/moe_routing.cpp) computes them: softmax / sigmoid / softmax over the selected scores, the
// score-correction bias (selection only), group-limited top-k, renormalisation (sum clamped to
// 2^-14) and the routed scale. Selection ties go to the lower index (strict >), as on the CPU. The
// arithmetic is f32 (route_token's is f64, and GLSL has no f64 exp): weights agree with the CPU's to
// f32 rounding. Every value is the token's own: a token's route never depends on the others.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint64_t logits, bias, scratch, ids, weights;  // bias: 0 for none; scratch: 3 E floats per token
    uint n, n_experts, k, scoring, normalize, n_groups, n_groups_used;
    float scale;
} pc;

// out[0..k) = the k largest of v[0..n), largest first; the strict > keeps the lower index on a tie.
void top_k(uint64_t v, uint n, uint k, uint64_t out_ids) {
    for (uint j = 0; j < k; ++j) {
        int best = -1;
        for (uint e = 0; e < n; ++e) {
            bool taken = false;
            for (uint i = 0; i < j; ++i) taken = taken || Ints(out_ids).v[i] == int(e);
            if (taken) continue;
            if (best < 0 || Floats(v).v[e] > Floats(v).v[uint(best)]) best = int(e);
        }
        Ints(out_ids).v[j] = best;
    }
}

void main() {
    const uint t = flat_invocation(64u);
    if (t >= pc.n) return;
    const uint E = pc.n_experts, k = pc.k;
    Floats l = Floats(pc.logits + uint64_t(t) * E * 4u);
    const uint64_t ids = pc.ids + uint64_t(t) * k * 4u;
    Floats w = Floats(pc.weights + uint64_t(t) * k * 4u);
    const bool plain = pc.scoring == 0u && pc.bias == 0ul && pc.n_groups <= 1u;
    if (plain) {  // selection on the logits; the softmax over every expert in expert order
        top_k(pc.logits + uint64_t(t) * E * 4u, E, k, ids);
        const float m = l.v[uint(Ints(ids).v[0])];
        float sum = 0.0, picked = 0.0;
        for (uint e = 0; e < E; ++e) sum += exp(l.v[e] - m);
        for (uint j = 0; j < k; ++j) picked += exp(l.v[uint(Ints(ids).v[j])] - m);
        const float denom = pc.normalize != 0u ? picked : sum;
        for (uint j = 0; j < k; ++j) w.v[j] = exp(l.v[uint(Ints(ids).v[j])] - m) / denom * pc.scale;
        return;
    }
    const uint64_t s_at = pc.scratch + uint64_t(t) * 3u * E * 4u, sel_at = s_at + uint64_t(E) * 4u,
                   groups_at = sel_at + uint64_t(E) * 4u, kept_at = groups_at + uint64_t(pc.n_groups) * 4u;
    Floats s = Floats(s_at), sel = Floats(sel_at);
    if (pc.scoring == 0u) {  // softmax
        float m = l.v[0];
        for (uint e = 1; e < E; ++e) m = max(m, l.v[e]);
        float sum = 0.0;
        for (uint e = 0; e < E; ++e) {
            s.v[e] = exp(l.v[e] - m);
            sum += s.v[e];
        }
        for (uint e = 0; e < E; ++e) s.v[e] /= sum;
    } else if (pc.scoring == 1u) {  // sigmoid
        for (uint e = 0; e < E; ++e) s.v[e] = 1.0 / (1.0 + exp(-l.v[e]));
    } else {  // softmax over the selected: scores are the logits
        for (uint e = 0; e < E; ++e) s.v[e] = l.v[e];
    }
    for (uint e = 0; e < E; ++e) sel.v[e] = s.v[e] + (pc.bias != 0ul ? Floats(pc.bias).v[e] : 0.0);
    if (pc.n_groups > 1u) {  // keep the n_groups_used groups with the best two-expert sums
        const uint per = E / pc.n_groups;
        Floats group_score = Floats(groups_at);
        for (uint g = 0; g < pc.n_groups; ++g) {
            top_k(sel_at + uint64_t(g * per) * 4u, per, 2u, kept_at);
            group_score.v[g] = sel.v[g * per + uint(Ints(kept_at).v[0])] + sel.v[g * per + uint(Ints(kept_at).v[1])];
        }
        top_k(groups_at, pc.n_groups, pc.n_groups_used, kept_at);
        for (uint g = 0; g < pc.n_groups; ++g) {
            bool kept = false;
            for (uint i = 0; i < pc.n_groups_used; ++i) kept = kept || Ints(kept_at).v[i] == int(g);
            if (!kept)
                for (uint e = g * per; e < (g + 1u) * per; ++e) sel.v[e] = uintBitsToFloat(0xff800000u);  // -inf
        }
    }
    top_k(sel_at, E, k, ids);
    for (uint j = 0; j < k; ++j) w.v[j] = s.v[uint(Ints(ids).v[j])];
    if (pc.scoring == 2u) {
        float m = w.v[0];
        for (uint j = 1; j < k; ++j) m = max(m, w.v[j]);
        float sum = 0.0;
        for (uint j = 0; j < k; ++j) {
            w.v[j] = exp(w.v[j] - m);
            sum += w.v[j];
        }
        for (uint j = 0; j < k; ++j) w.v[j] /= sum;
    }
    if (pc.normalize != 0u) {
        float sum = 0.0;
        for (uint j = 0; j < k; ++j) sum += w.v[j];
        sum = max(sum, 6.103515625e-5);  // llama.cpp's clamp: the smallest normal f16
        for (uint j = 0; j < k; ++j) w.v[j] /= sum;
    }
    for (uint j = 0; j < k; ++j) w.v[j] *= pc.scale;
}
