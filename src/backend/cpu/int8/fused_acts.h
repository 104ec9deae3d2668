// Internal: the activation operands of the int8 kernels (int8_fused.h builds them), in a named
// namespace so that the VNNI and the AMX translation units pass the same operands to each other.
#pragma once
#include <cstdint>

namespace pagoda::backend::cpu::detail {

// Activation operands laid out for the fused kernels (built once per matmul call). Per-block arrays
// have nbp = nb rounded up to 8 entries per token, zero-padded, so a group loads 8 lanes.
struct FusedActs {
    const int8_t* q;       // [n_tokens][cols]
    const float* d;        // [n_tokens][nbp]
    const float* s;        // [n_tokens][nbp]   d * sum(q) of the block (min formats)
    const float* sh;       // [n_tokens][nbp/8][16]: per group, d * sum(q) of each block's first half
                           // (lanes [0,8)) and second half ([8,16)); only for per-half mins (Q2_K)
    const int32_t* corr;   // [n_tokens][nbp/8][16]: per group, lane j of [0,8) = first half (or whole
                           // block) of block j, [8,16) = second half; null when the offset is 0
    int64_t cols, nb, nbp;
};

}  // namespace pagoda::backend::cpu::detail
