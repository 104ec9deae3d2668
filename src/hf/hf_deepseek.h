// DeepSeek V2 / V3 / R1, Kimi K2 and GLM-4.7-Flash (DeepseekV3ForCausalLM, DeepseekV2ForCausalLM,
// Glm4MoeLiteForCausalLM) as GGUF `deepseek2`, the way llama.cpp's converter (DeepseekV2Model) hands
// them over: multi-head latent attention as one KV head (key_length = kv_lora_rank + rope, the per-head
// sizes as key_length_mla / value_length_mla), kv_b_proj split into attn_k_b (each head's K block,
// transposed) and attn_v_b, routed + shared experts after first_k_dense_replace dense layers, and
// YaRN's mscale_all_dim as 0.1 x yarn_log_multiplier. The checkpoints' RoPE rows are already in the
// adjacent-pair order deepseek2 rotates (rope_interleave), so no row is permuted.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "hf/config_reader.h"
#include "hf/hf_config.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::hf {

// The deepseek2 part of read_hf_config: every key past the common ones (head_count_kv 1, the MLA
// sizes, the experts and router, YaRN), into m.metadata; sets m.head_dim (nope + rope),
// m.n_kv_heads (1), m.n_experts and m.nextn_layers. Refuses what pagoda's builder does not compute.
void read_deepseek2_config(const detail::Config& c, HfModel& m);

// The inverse, for hf_config_json: the keys of a deepseek2 GGUF (either attention layout) that
// DeepseekV3Config holds. Throws for metadata it cannot state.
void write_deepseek2_config(const gguf::File& f, nlohmann::json& j);

// kv_b_proj [H (nope + v), kv_lora] (HF's bytes, element size `elt`) -> attn_k_b [H][kv_lora][nope]
// and attn_v_b [H][v][kv_lora] (row-major, as the converter's view / split / transpose), and back.
void split_kv_b(const uint8_t* kv_b, uint8_t* k_b, uint8_t* v_b, int64_t heads, int64_t nope, int64_t v, int64_t kv_lora,
                uint64_t elt);
void join_kv_b(const uint8_t* k_b, const uint8_t* v_b, uint8_t* kv_b, int64_t heads, int64_t nope, int64_t v, int64_t kv_lora,
               uint64_t elt);

}  // namespace pagoda::hf
