// The Vulkan backend's push constant blocks, laid out as the shaders' push_constant blocks (std430:
// 64-bit addresses first), and the small helpers that fill them (the KV geometry, a dispatch grid).
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>

#include "backend/vulkan/vk_context.h"
#include "kv/kv_layout.h"

namespace pagoda::backend::vulkan {

// Push constants, laid out as the shaders' push_constant blocks (std430: 64-bit addresses first).
// No struct has padding (an explicit zeroed `pad` where it would): a replayed step is matched by its
// push bytes (vk_context.h's Stream), and indeterminate padding would make equal steps differ.
struct EmbedPush { uint64_t table, groups, tokens, out; uint32_t n, cols, add, pad = 0; };
// range: 0, or the address of (first, n) for a GEMM over tokens the device chose (the MoE's experts);
// bias: 0, or a vector added to each output row (one add, as add_bias).
struct MatmulPush { uint64_t w, groups, x, out, range, bias; uint32_t rows, row0, cols, n; };
// r: 0, or the residual added to x first (add_rms_norm).
struct NormPush { uint64_t x, w, out, r; uint32_t cols, rows; float eps; uint32_t pad = 0; };
struct LayerNormPush { uint64_t x, w, b, out; uint32_t cols, rows; float eps; uint32_t pad = 0; };
// i: an integer operand (attn_temperature: the length), 0 for the other ops.
struct PointwisePush { uint64_t a, b, out; uint32_t n, cols, op; float f; uint32_t i = 0, pad = 0; };
struct SoftmaxPush { uint64_t x; uint32_t cols, rows; };
struct RopePush { uint64_t x, table; uint32_t n, n_heads, head_dim, half, cols, neox; };
struct KvGeometryPush { uint32_t block_size, dtype, head_dim, row_bytes, head_block_bytes, layer_block_bytes, bytes_per_block; };
struct KvWritePush { uint64_t k, v, cache, slots; uint32_t n, n_kv_heads, layer_offset; KvGeometryPush g; };
// partials: 0, or split-KV attention's scratch (vulkan_attention.h) with its split_keys (its layout
// fixed by kMaxAttentionSplits). seq_index: per token, its sequence, its own position (ALiBi's pos_q;
// a sliding window counts back from it) and its span's start (backend/attention_span.h).
struct AttentionPush {
    uint64_t q, out, cache, positions, seq_index, tables, sinks;  // sinks: 0 for none
    uint32_t n_heads, n_kv_heads, layer_offset, table_stride, window;
    float scale, softcap;
    KvGeometryPush g;
    uint64_t partials = 0;
    uint32_t split_keys = 0;
    float alibi_max_bias = 0;  // AttentionParams::alibi_max_bias
};
struct CopyColumnsPush {
    uint64_t src, dst;
    uint32_t n, n_heads, width, src_stride, src_offset, dst_stride, dst_offset, src_cols, dst_cols, pad = 0;
};
// lora_add.comp: one LoRA segment's rows; y_stride: floats between y's rows.
struct LoraAddPush { uint64_t x, y, a, b, rows; uint32_t n_rows, cols_in, cols_out, rank; float scale; uint32_t y_stride; };
// The MoE combine (moe_combine.comp): per token, the weighted sum of its k expert rows in rank order
// plus the (gated) shared expert's row.
struct MoeCombinePush { uint64_t y, weights, slots, shared_y, shared_gate, x, out; uint32_t n, k, dim, pad = 0; };
// The device router (moe_route.comp), the slot assignment (moe_slots.comp) and the row gather.
struct MoeRoutePush {
    uint64_t logits, bias, scratch, ids, weights;
    uint32_t n, n_experts, k, scoring, normalize, n_groups, n_groups_used;
    float scale;
};
struct MoeSlotsPush { uint64_t ids, range, indirect, slots; uint32_t entries, n_experts, gate_tiles, down_tiles; };
struct MoeGatherPush { uint64_t x, slots, xg; uint32_t n, k, dim, pad = 0; };
struct CausalConv1dPush { uint64_t x, weight, state, out, rows; uint32_t tokens, channels, kernel, silu; };
struct GatedDeltaRulePush {
    uint64_t q, k, v, g, beta, state, out, rows;
    uint32_t tokens, n_k_heads, n_v_heads, head_dim;
    float scale, l2_eps;
};
static_assert(sizeof(AttentionPush) <= Context::kPushConstantBytes && sizeof(KvWritePush) <= Context::kPushConstantBytes &&
              sizeof(MoeCombinePush) <= Context::kPushConstantBytes && sizeof(MoeRoutePush) <= Context::kPushConstantBytes &&
              sizeof(GatedDeltaRulePush) <= Context::kPushConstantBytes);

// Each size is the sum of its members': no padding bytes.
static_assert(sizeof(EmbedPush) == 48 && sizeof(MatmulPush) == 64 && sizeof(NormPush) == 48 && sizeof(LayerNormPush) == 48 &&
              sizeof(PointwisePush) == 48 && sizeof(SoftmaxPush) == 16 && sizeof(RopePush) == 40 && sizeof(KvGeometryPush) == 28 &&
              sizeof(KvWritePush) == 72 && sizeof(AttentionPush) == 128 && sizeof(CopyColumnsPush) == 56 &&
              sizeof(MoeCombinePush) == 72 && sizeof(MoeRoutePush) == 72 && sizeof(MoeSlotsPush) == 48 && sizeof(MoeGatherPush) == 40 &&
              sizeof(CausalConv1dPush) == 56 && sizeof(GatedDeltaRulePush) == 88 && sizeof(LoraAddPush) == 64);

enum class Pointwise : uint32_t { add = 0, add_bias = 1, silu_mul = 2, gelu_mul = 3, scale = 4, softcap = 5, gelu = 6, swiglu_oai = 7,
                              sigmoid_mul = 8, silu_mul_halves = 9, attn_temperature = 10 };

inline KvGeometryPush geometry(const kv::KvLayout& l) {
    return {uint32_t(l.block_size), uint32_t(l.dtype), uint32_t(l.head_dim), uint32_t(l.row_bytes()),
            uint32_t(l.head_block_bytes()), uint32_t(l.layer_block_bytes()), uint32_t(l.bytes_per_block())};
}

// A grid of `groups` workgroups as x (at most 65535) by y.
inline std::pair<uint32_t, uint32_t> grid(uint64_t groups) {
    const uint64_t x = std::min<uint64_t>(groups, 65535);
    return {uint32_t(x), uint32_t(x == 0 ? 0 : (groups + x - 1) / x)};
}

}  // namespace pagoda::backend::vulkan
