#version 450
// After moe_route.comp, one workgroup for the step: each expert's token count and first slot
// (range[2 e], range[2 e + 1] = first, count: slots grouped by expert, experts in order, a token's
// (t, j) entries in order within an expert), each entry's slot, and per expert the indirect dispatch
// sizes of its gate|up GEMM (gx = gate_tiles, gy = ceil(count / 32)) and of its down GEMM
// (down_tiles, the same gy). An expert no token chose gets gy = 0: its weights are never read.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
    uint64_t ids, range, indirect, slots;
    uint entries, n_experts, gate_tiles, down_tiles;  // entries = tokens x k
} pc;
const uint MAX_EXPERTS = 1024;
shared uint first_of[MAX_EXPERTS];
shared uint count_of[MAX_EXPERTS];

void main() {
    const uint lid = gl_LocalInvocationID.x;
    Ints ids = Ints(pc.ids);
    for (uint e = lid; e < pc.n_experts; e += 256u) {
        uint count = 0u;
        for (uint i = 0; i < pc.entries; ++i) count += ids.v[i] == int(e) ? 1u : 0u;
        count_of[e] = count;
    }
    barrier();
    if (lid == 0u) {
        uint at = 0u;
        for (uint e = 0; e < pc.n_experts; ++e) {
            first_of[e] = at;
            at += count_of[e];
        }
    }
    barrier();
    Uints range = Uints(pc.range), indirect = Uints(pc.indirect), slots = Uints(pc.slots);
    for (uint e = lid; e < pc.n_experts; e += 256u) {
        uint next = first_of[e];
        for (uint i = 0; i < pc.entries; ++i)
            if (ids.v[i] == int(e)) slots.v[i] = next++;
        const uint tiles = (count_of[e] + 31u) / 32u;
        range.v[2u * e] = first_of[e];
        range.v[2u * e + 1u] = count_of[e];
        indirect.v[6u * e] = pc.gate_tiles;
        indirect.v[6u * e + 1u] = tiles;
        indirect.v[6u * e + 2u] = 1u;
        indirect.v[6u * e + 3u] = pc.down_tiles;
        indirect.v[6u * e + 4u] = tiles;
        indirect.v[6u * e + 5u] = 1u;
    }
}
