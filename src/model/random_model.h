// Random-weight GGUF models of every supported architecture for tests and benchmarks (`pagoda gen-model`).
// Shapes come from a preset or explicit sizes. The vocabulary is copied from a vocabulary GGUF when
// one is given (so generated ids decode to real pieces), else a synthetic SentencePiece vocabulary
// (byte fallback + letter n-grams) is written. Weights are scaled (std 1/sqrt(fan-in), output
// projections further by 1/sqrt(2·layers)) so activations stay finite over long generations.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/ggml_types.h"

namespace pagoda::gguf {
class File;
class Writer;
}

namespace pagoda::model {

// qwen3vl: the M-RoPE sections (temporal, height, width) of `pairs` rotary pairs, in Qwen3-VL's
// proportions (24, 20, 20 of 64), and the deep-stack layers, min(3, n_layers - 1), which the
// matching mmproj's deep-stack mergers must number.
struct RopeSections {
    int64_t t = 0, h = 0, w = 0;
};
RopeSections qwen3vl_rope_sections(int64_t pairs);
int64_t qwen3vl_deepstack_layers(int64_t n_layers);

struct RandomModelSpec {
    // llama, qwen2 (QKV bias, NEOX RoPE), qwen3 (Q/K norms, NEOX RoPE), qwen3vl (qwen3 with M-RoPE
    // sections and deep-stack image input), qwen2moe, qwen3moe, gemma2
    // (post-norms, soft caps, alternating sliding layers; tied head), gemma3 (gemma2 without caps,
    // with Q/K norms and 5 sliding layers per global one) or phi3 (fused attn_qkv and gate|up
    // ffn_up, LongRoPE factors), gpt-oss (biased attention with sinks, YaRN, alternating sliding
    // layers, biased experts: needs experts), deepseek2 (MLA, leading dense layers, shared experts: needs
    // experts; the fields below), glm4moe (needs experts) or glm4 (GLM-4-0414: sandwich norms, fused
    // gate|up), smollm3 (llama with every 4th layer NoPE), mistral3 (llama keys), minimax-m2 (whole-row
    // Q/K norms, partial NEOX RoPE, sigmoid-routed experts with a selection bias: needs experts), or the encoders bert and nomic-bert (see `pooling` below)
    std::string arch = "llama";
    std::string name = "random";
    int64_t n_layers = 2, dim = 64, n_heads = 4, n_kv_heads = 2, ffn_dim = 160;
    int64_t vocab_size = 512;    // used only for the synthetic vocabulary
    bool fim_tokens = false;     // synthetic vocabulary: its last six ids are fill-in-the-middle tokens
    bool image_tokens = false;   // synthetic vocabulary: Gemma 3's <start_of_image>, <end_of_image>, <image_soft_token>
                                 // (qwen3vl: <|vision_start|>, <|vision_end|>, <|image_pad|>; gemma4: <|image>,
                                 // <image|>, <|image|>)
    int64_t context_length = 2048;
    int64_t head_dim = 0;        // 0: dim / n_heads
    float rope_theta = 10000.0f;
    bool tied_output = false;
    gguf::GgmlType type = gguf::GgmlType::F32;  // matrices; norms and biases stay F32
    // gpt-oss: the experts (ffn_*_exps) in MXFP4 as gpt-oss GGUFs store them (dim and the expert
    // FFN width multiples of 32); the other matrices in `type`.
    bool mxfp4_experts = false;
    uint64_t seed = 1;
    // Mixture of experts: n_experts > 0 replaces every FFN by a router and stacked experts
    // (ffn_*_exps, [cols, rows, n_experts]); required for qwen2moe / qwen3moe, optional for llama
    // (Mixtral). The router's weights are scaled up (std 2/sqrt(dim)) so each token's top-k is decided
    // by clear margins.
    int64_t n_experts = 0, n_experts_used = 2;
    int64_t expert_ffn_dim = 0;         // 0: ffn_dim
    int64_t shared_expert_ffn_dim = 0;  // qwen2moe's shared expert; 0: 2 * the expert FFN width
    // {arch}.attention.sliding_window: 0 gives gemma2 4096, gemma3 512, phi3 none (ignored by llama-
    // family archs); swa_period > 0 writes {arch}.attention.sliding_window_pattern as that period.
    int64_t sliding_window = 0, swa_period = 0;
    float attn_softcap = 50.0f, final_softcap = 30.0f;  // gemma2
    // llama: "llama3" writes rope_freqs.weight from Llama 3.1's formula (factor 8, low 1, high 4,
    // original context = context_length / 4) as llama.cpp's converter does; "llama3_keys" writes
    // those parameters as llama.rope.scaling.* keys instead of the tensor.
    std::string rope_scaling;
    int64_t original_context = 0;  // phi3 LongRoPE / llama3: 0 gives context_length / 4
    // Llama 4's attention temperature, the keys llama.cpp reads: {arch}.attention.temperature_scale
    // (beta) for deepseek2 (Mistral-Large-3's form, with attention.temperature_length, the floor's
    // length; 0 gives the original context) and mistral3 (unset: its converter's 0.1; its length is
    // rope.scaling.original_context_length); refused for the other architectures and for HF folders.
    std::optional<float> attn_temperature_scale;
    int64_t attn_temperature_length = 0;
    // Multiplies the token embedding's std. Above 1 the current token dominates the residual stream,
    // so greedy decoding follows a near-fixed next-token map and soon repeats what its context
    // holds: the copy-heavy stand-in the speculative-decoding benchmarks use (no trained model of a
    // memory-bound size is among the fixtures).
    float embed_scale = 1.0f;
    // A reranker with a classification head (model/classifier_head.h): {arch}.pooling_type 4 and
    // random cls.output.weight / cls.output.bias ("output": hidden -> classes, an LLM classifier), or
    // also cls.weight / cls.bias before it ("dense": hidden -> hidden, tanh; RoBERTa's form); ""
    // none. rank_classes 0: 2 for qwen3 (labels "yes", "no", softmaxed), else 1. jina-bert-v2 writes
    // jina-reranker-v1's head for either: cls.weight (hidden -> 1) and cls.bias only.
    std::string rank_head;
    int64_t rank_classes = 0;
    // bert / nomic-bert (encoders, random_encoder.cpp): {arch}.pooling_type "mean" (1) or "cls" (2).
    // Their synthetic vocabulary is WordPiece ("bert" tokenizer); context_length is bert's position
    // table's rows.
    std::string pooling = "mean";
    // bert: the synthetic vocabulary, "wordpiece" (BERT's) or "unigram" (XLM-R's "t5" form), and, for
    // write_random_model_hf, the Hugging Face class written (hf/hf_encoder_config.h; "" picks one).
    std::string encoder_vocab = "wordpiece";
    std::string hf_class;
    // deepseek2 (random_deepseek2.cpp; needs experts): head_dim is the key's head size (nope + rope);
    // q_lora_rank 0 writes V2-Lite's plain attn_q, -1 picks dim / 2; kv_lora_rank 0 picks dim / 2;
    // mla_rope_dims 0 picks a quarter of head_dim (even); v_head_dim 0 picks head_dim - rope.
    // expert_gating 2 (sigmoid) also writes V3's correction bias exp_probs_b.bias; yarn writes V3's
    // rope.scaling (factor 40 over a quarter of context_length, yarn_log_multiplier 0.1). mla_split
    // writes newer converters' form: attn_k_b / attn_v_b (the same numbers as the kv_b the seed gives)
    // and key_length_mla / value_length_mla with the latent's key_length and value_length.
    int64_t q_lora_rank = -1, kv_lora_rank = 0, mla_rope_dims = 0, v_head_dim = 0;
    int64_t leading_dense = 1, n_shared_experts = 1;
    int64_t expert_gating = 1, expert_groups = 0, expert_groups_used = 0;
    float expert_weights_scale = 1.0f;
    bool expert_weights_norm = false, yarn = false, mla_split = false;
    // glm4moe (random_glm.cpp; needs experts) takes leading_dense, n_shared_experts, expert_gating (0:
    // sigmoid, as its converter writes), expert_weights_scale and expert_weights_norm above, and:
    // qk_norm writes GLM-4.5's per-head Q/K norms (Air has none); nextn_layers appends that many
    // NextN blocks (block_count counts them, nextn_predict_layers names them). glm4 and glm4moe rotate
    // half of each head (rope.dimension_count = head_dim / 2) and write Q/K/V biases.
    // jina-bert-v2 (random_encoder.cpp): qk_norm writes the -code form (attn_q_norm / attn_k_norm over
    // the whole rows, attn_norm_2, ffn_gate and ffn_up apart, as older converters split
    // up_gated_layer); without it the -en form (one fused ffn_up of 2 x FFN rows, gate first).
    // qwen35 / qwen35moe (random_qwen35.cpp; qwen35moe needs experts) take nextn_layers too, and
    // shared_expert_ffn_dim (0: the expert width) for qwen35moe's gated shared expert.
    // qwen3next (random_qwen35.cpp; needs experts) takes the same; fused_qkvz writes older converters'
    // fused ssm_in (the same weights as the split attn_qkv + attn_gate).
    bool qk_norm = false, fused_qkvz = false;
    int64_t nextn_layers = 0;
    // gemma4 (random_gemma4.cpp): the last shared_kv_layers layers reuse an earlier layer's KV;
    // v_equals_k drops attn_v on full layers (V = K); n_experts > 0 adds the 26B-A4B's experts beside each
    // layer's dense FFN (expert_ffn_dim wide).
    int64_t shared_kv_layers = 0;
    bool v_equals_k = false;
    int64_t full_head_dim = 0, full_kv_heads = 0;  // gemma4's full layers (0: head_dim, n_kv_heads)
    // gemma4: > 0 writes the E2B/E4B form, per-layer embeddings of this many values a layer
    // (embedding_length_per_layer_input and the PLE tensors), and feed_forward_length as one width per
    // layer, the KV-sharing layers' twice ffn_dim (the E-models' double-wide MLP).
    int64_t per_layer_embd = 0;
};

// "tiny", "small" (~134 M parameters) or "tinyllama" (~1.1 B); throws on other names.
RandomModelSpec random_model_preset(const std::string& name);

// Writes the model; `vocab` may be null (synthetic vocabulary). Returns the parameter count.
int64_t write_random_model(const RandomModelSpec& spec, const gguf::File* vocab, const std::string& path);
// The same model (same seed: same weights) as a Hugging Face folder: config.json + safetensors
// (`shards` > 1: sharded with model.safetensors.index.json). Llama 3 scaling goes into config.json's
// rope_scaling. The vocabulary (`vocab`'s, or the synthetic one) is written as tokenizer.json +
// tokenizer_config.json (with the vocabulary's chat template, if it has one).
int64_t write_random_model_hf(const RandomModelSpec& spec, const std::string& dir, int shards = 1,
                              const gguf::File* vocab = nullptr);
// gpt-oss into `w` (build_random_model calls it; random_gpt_oss.cpp).
int64_t build_random_gpt_oss(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// deepseek2 into `w` (random_deepseek2.cpp).
int64_t build_random_deepseek2(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// glm4moe or glm4 into `w` (random_glm.cpp).
int64_t build_random_glm(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// minimax-m2 into `w` (random_minimax_m2.cpp; needs experts).
int64_t build_random_minimax_m2(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// qwen35, qwen35moe or qwen3next into `w` (random_qwen35.cpp).
int64_t build_random_qwen35(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// gemma4 into `w` (random_gemma4.cpp).
int64_t build_random_gemma4(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// Which family's three image control tokens a synthetic vocabulary carries (start, end, soft token):
// Gemma 3's <start_of_image>, <end_of_image>, <image_soft_token>; Qwen-VL's <|vision_start|>,
// <|vision_end|>, <|image_pad|>; Gemma 4's <|image>, <image|>, <|image|>.
enum class ImageTokenSet { gemma3, qwen_vl, gemma4 };
// The synthetic SentencePiece vocabulary (byte fallback + letter n-grams) into `w`; image_tokens adds
// the set's three image control tokens.
void write_synthetic_vocab(gguf::Writer& w, int64_t vocab_size, bool fim, bool image_tokens = false,
                           ImageTokenSet set = ImageTokenSet::gemma3);
// The vocabulary into `w`: `vocab`'s tokenizer.* keys when given, else the synthetic one of
// vocab_size tokens. Returns the vocabulary's size (the embedding and output rows).
int64_t write_vocab(gguf::Writer& w, const gguf::File* vocab, int64_t vocab_size, bool fim, bool image_tokens = false,
                    ImageTokenSet set = ImageTokenSet::gemma3);
// The bert or nomic-bert encoder into `w` (build_random_model calls it for those archs).
int64_t build_random_bert(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// The model into `w` (metadata and tensors), for either form.
int64_t build_random_model(const RandomModelSpec& spec, const gguf::File* vocab, gguf::Writer& w);
// The architectures gen-model writes, in arch/arch_description.h's order.
std::vector<std::string> random_model_architectures();

}  // namespace pagoda::model
