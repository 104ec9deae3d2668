// The Gemma 2 / Gemma 3 graph (gemma2.cpp, gemma3.cpp read their metadata into a GemmaVariant).
// Per layer:
//   h = rms_norm(x) ; q, k, v = h W_qkv ; [gemma3: per-head rms_norm(q), rms_norm(k)] ; rope(q, k)
//   kv_write(k, v) ; a = attention(q) (scale 1/sqrt(query_pre_attn_scalar), soft cap, window)
//   x += rms_norm(a W_o)                                    (blk.N.post_attention_norm)
//   h = rms_norm(x) ; x += rms_norm((gelu(h W_gate) * (h W_up)) W_down)   (blk.N.post_ffw_norm)
// with the embedding scaled by sqrt(dim) (rounded to the activation type first, as Gemma does in its
// own dtype — here f32), NEOX RoPE, the head tied to the embedding unless output.weight exists, and
// Gemma 2's final soft cap on the logits. Norm weights are used as stored: llama.cpp's converter
// already folds Gemma's (1 + w) into the GGUF weights.
#pragma once
#include <vector>

#include "model/arch/arch.h"

namespace pagoda::model {

struct GemmaVariant {
    bool qk_norm = false;              // gemma3: blk.N.attn_q_norm / attn_k_norm, [head_dim] each
    float attn_softcap = 0;            // gemma2: {arch}.attn_logit_softcapping
    float final_softcap = 0;           // gemma2: {arch}.final_logit_softcapping
    float query_scale = 0;             // multiplies q.k (1/sqrt(query_pre_attn_scalar))
    std::vector<int32_t> windows;      // per layer: sliding window, 0 for a global layer
    float local_rope_theta = 0;        // RoPE base of the sliding layers (0: the global one)
    bool local_rope_unscaled = false;  // gemma3: linear RoPE scaling applies to global layers only
    bool image_input = false;          // gemma3: rows may take an image's soft-token embeddings
};

BuiltModel build_gemma_family(const gguf::File& file, const ModelConfig& config, backend::Backend& backend,
                              const GemmaVariant& variant);

// llama.cpp's query scale for Gemma: 1/sqrt(dim / heads) for the 27B models (recognised, as
// llama.cpp does, by their layer count), else 1/sqrt(head_dim).
float gemma_query_scale(const ModelConfig& config, int64_t layers_of_27b);

}  // namespace pagoda::model
