// config.json of a Hugging Face causal LM -> the GGUF metadata llama.cpp's converter would write for
// it (`general.architecture`, `{arch}.block_count`, `{arch}.attention.head_count_kv`, rope scaling,
// windows, soft caps, expert counts, ...), plus what the tensor mapping needs (head counts, which
// transforms apply, the tensor name prefix). Architectures (`architectures[0]`): Llama, Mistral and
// Mixtral (-> llama), Qwen2, Qwen2Moe, Qwen3, Qwen3Moe, Gemma2, Gemma3 (text-only, and
// Gemma3ForConditionalGeneration's `text_config`), Phi3, SmolLM3, Glm4, Glm4Moe, Qwen3_5 and Qwen3_5Moe (text model;
// *ForConditionalGeneration's `text_config`, its vision tower and MTP tensors not loaded); BERT-family encoders as hf_encoder_config.h says;
// DeepseekV3 / DeepseekV2 / Glm4MoeLite (-> deepseek2, hf_deepseek.h); Gemma4 (text, and
// Gemma4ForConditionalGeneration's text_config; hf_gemma4.h).
// A missing key, a value of the wrong type or a setting pagoda's builders do not implement is a
// pagoda::Error naming the file and the key.
// tokenizer.ggml.* keys are not written here (config.json's token ids are not a tokenizer).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.h"

namespace pagoda::hf {

struct HfModel {
    std::string hf_arch;  // architectures[0], e.g. "MistralForCausalLM"
    std::string arch;     // the GGUF architecture, e.g. "llama"
    std::vector<std::pair<std::string, gguf::Value>> metadata;
    int64_t n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_experts = 0;
    bool mixtral_names = false;  // block_sparse_moe.experts.E.w1/w2/w3 rather than mlp.experts.E.*_proj
    bool permute_qk = false;     // llama family: Q/K rows go from rotate-half order to adjacent pairs
    bool norm_plus_one = false;  // gemma: RMSNorm weights are stored as w for x·(1+w)
    bool tied = false;           // tie_word_embeddings
    std::vector<std::string> prefixes;  // where the decoder's tensors live ("model.", ...)
    std::vector<std::string> head_names;  // the untied output head's possible names
    std::vector<std::string> skipped_prefixes;  // tensors of other towers (vision) that are not loaded
    std::vector<float> rope_factors_short, rope_factors_long;  // phi3 LongRoPE
    // glm4moe: num_nextn_predict_layers trailing NextN blocks (layers n_layers..) in the folder, not
    // loaded (pagoda does not run them; the GGUF metadata counts only the n_layers run).
    int64_t nextn_layers = 0;
    // qwen35 / qwen35moe (hf_qwen35.h): the DeltaNet's key heads, value heads and head size.
    int64_t delta_k_heads = 0, delta_v_heads = 0, delta_head = 0;
    // Encoders (hf_encoder_config.h): BertModel, RobertaModel, XLMRobertaModel and their
    // *ForSequenceClassification, all GGUF `bert`.
    bool encoder = false;
    bool roberta = false;          // RoBERTa / XLM-R tensor names (classifier.dense / out_proj)
    bool classifier = false;       // *ForSequenceClassification: the head maps to cls / cls.output
    int64_t position_offset = 0;   // RoBERTa: position_embeddings rows the GGUF drops (padding_idx + 1)
    // deepseek2 (hf_deepseek.h): the per-head no-RoPE key and value sizes and the KV latent's rank,
    // for splitting kv_b_proj into attn_k_b / attn_v_b.
    int64_t mla_nope = 0, mla_v = 0, mla_kv_lora = 0;
    // gemma4 (hf_gemma4.h): the full layers' proportional RoPE as the rope_freqs.weight the converter
    // adds, and the first layer that shares KV (its K/V tensors, if the folder has them, are not loaded).
    std::vector<float> rope_freqs;
    int64_t first_shared_kv = -1;
};

// `name` (the config.json path) is used in errors.
HfModel read_hf_config(std::string_view json_text, const std::string& name);

// The inverse, for writing a folder: config.json for a GGUF model of a supported architecture, with
// `rope_factors_short/long` the LongRoPE factor tensors' values when the model has them. Throws for
// metadata config.json cannot express (e.g. rope_freqs.weight without the llama3 scaling keys).
std::string hf_config_json(const gguf::File& model, const std::string& torch_dtype,
                           const std::vector<float>& rope_factors_short, const std::vector<float>& rope_factors_long);

}  // namespace pagoda::hf
