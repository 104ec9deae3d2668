#include "model/random_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <vector>

#include "arch/arch_description.h"
#include "core/error.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "tokenizer/hf_tokenizer.h"
#include "hf/hf_folder.h"
#include "model/arch/rope_frequencies.h"
#include "model/random_tensors.h"

namespace pagoda::model {

using gguf::GgmlType;
using gguf::Value;
using random_detail::constant_f32;
using random_detail::random_tensor;
using random_detail::Rng;

RandomModelSpec random_model_preset(const std::string& name) {
    RandomModelSpec s;
    s.name = "random-" + name;
    if (name == "tiny") {
        s.n_layers = 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 160; s.vocab_size = 512;
    } else if (name == "small") {
        s.n_layers = 12; s.dim = 768; s.n_heads = 12; s.n_kv_heads = 12; s.ffn_dim = 2048; s.vocab_size = 32000;
    } else if (name == "tinyllama") {
        s.n_layers = 22; s.dim = 2048; s.n_heads = 32; s.n_kv_heads = 4; s.ffn_dim = 5632; s.vocab_size = 32000;
    } else {
        fail("unknown model preset '{}' (expected tiny, small or tinyllama)", name);
    }
    return s;
}

// A SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte pieces, then "▁"-prefixed and bare
// letter n-grams with descending scores, so any text encodes and every id decodes. With fim, the
// last six ids are Qwen2.5-Coder's fill-in-the-middle control tokens, named by the fim_* keys. With
// image_tokens, the three ids before those (or the last three) are Gemma 3's image control tokens.
void write_synthetic_vocab(gguf::Writer& w, int64_t vocab_size, bool fim, bool image_tokens, ImageTokenSet set) {
    if (vocab_size < 3 + 256 + 1) fail("a synthetic vocabulary needs at least 260 tokens, got {}", vocab_size);
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(fmt::format("<0x{:02X}>", b));
        types.push_back(6);
    }
    const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
    const std::string letters = "etaoinshrdlucmfwypvbgkqjxz";
    std::vector<std::string> grams;
    for (char c : letters) grams.push_back(std::string(1, c));
    for (char a : letters) for (char b : letters) grams.push_back(std::string{a, b});
    for (char a : letters) for (char b : letters) for (char c : letters) grams.push_back(std::string{a, b, c});
    for (size_t i = 0; int64_t(tokens.size()) < vocab_size && i < grams.size(); ++i) {
        for (const std::string& piece : {space + grams[i], grams[i]}) {
            if (int64_t(tokens.size()) >= vocab_size) break;
            tokens.push_back(piece);
            types.push_back(1);
        }
    }
    if (int64_t(tokens.size()) < vocab_size) fail("synthetic vocabulary is limited to {} tokens", tokens.size());
    std::vector<float> scores(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) scores[i] = i < 259 ? 0.0f : -float(i - 259);
    if (fim) {
        if (vocab_size < 3 + 256 + 6 + 26) fail("a synthetic vocabulary with FIM tokens needs at least 291 tokens");
        const std::pair<const char*, const char*> fim_tokens[] = {
            {"<|fim_prefix|>", "fim_pre"}, {"<|fim_suffix|>", "fim_suf"}, {"<|fim_middle|>", "fim_mid"},
            {"<|fim_pad|>", "fim_pad"},    {"<|repo_name|>", "fim_rep"},  {"<|file_sep|>", "fim_sep"}};
        size_t id = tokens.size() - 6;
        for (const auto& [text, key] : fim_tokens) {
            tokens[id] = text;
            types[id] = 3;
            scores[id] = 0.0f;
            w.set(fmt::format("tokenizer.ggml.{}_token_id", key), Value::u32(uint32_t(id)));
            ++id;
        }
    }
    if (image_tokens) {
        if (vocab_size < 3 + 256 + 9 + 26) fail("a synthetic vocabulary with image tokens needs at least 294 tokens");
        size_t id = tokens.size() - (fim ? 9 : 3);
        const std::array<const char*, 3> gemma = {"<start_of_image>", "<end_of_image>", "<image_soft_token>"},
                                         qwen = {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"},
                                         gemma4 = {"<|image>", "<image|>", "<|image|>"};
        for (const char* text : set == ImageTokenSet::qwen_vl ? qwen : set == ImageTokenSet::gemma4 ? gemma4 : gemma) {
            tokens[id] = text;
            types[id] = 3;
            scores[id] = 0.0f;
            ++id;
        }
    }
    w.set("tokenizer.ggml.model", Value::string("llama"));
    w.set("tokenizer.ggml.tokens", Value::strings(tokens));
    w.set("tokenizer.ggml.scores", Value::f32s(scores));
    w.set("tokenizer.ggml.token_type", Value::i32s(types));
    w.set("tokenizer.ggml.bos_token_id", Value::u32(1));
    w.set("tokenizer.ggml.eos_token_id", Value::u32(2));
    w.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
}

int64_t write_vocab(gguf::Writer& w, const gguf::File* vocab, int64_t vocab_size, bool fim, bool image_tokens,
                    ImageTokenSet set) {
    if (!vocab) {
        write_synthetic_vocab(w, vocab_size, fim, image_tokens, set);
        return vocab_size;
    }
    for (const auto& [key, value] : vocab->metadata())
        if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
    return int64_t(vocab->get_strings("tokenizer.ggml.tokens").size());
}

constexpr float kGemmaPostNorm = 8.0f;

int64_t write_random_model(const RandomModelSpec& spec, const gguf::File* vocab, const std::string& path) {
    gguf::Writer w;
    const int64_t params = build_random_model(spec, vocab, w);
    w.write(path);
    return params;
}

int64_t write_random_model_hf(const RandomModelSpec& spec, const std::string& dir, int shards,
                              const gguf::File* vocab) {
    if (!spec.rank_head.empty() && spec.arch != "bert")
        fail("gen-model: a classification head (--rank-head) is written to a Hugging Face folder for bert only "
             "(as BertForSequenceClassification / XLMRobertaForSequenceClassification)");
    if (!spec.hf_class.empty() && spec.arch != "bert") fail("gen-model: --hf-class is for --arch bert");
    if (spec.arch == "mistral3")
        fail("gen-model: {} is written to GGUF only (no Hugging Face {} folders yet)", spec.arch, spec.arch);
    if (spec.attn_temperature_scale || spec.attn_temperature_length)
        fail("gen-model: the attention temperature (--attn-temperature-scale) is written to GGUF only (--format gguf)");
    RandomModelSpec s = spec;
    // config.json states Llama 3 scaling as parameters, the form the llama.rope.scaling.* keys take.
    if (s.rope_scaling == "llama3") s.rope_scaling = "llama3_keys";
    // Qwen3-Next's in_proj_qkvz is the fused ssm_in row for row (the split form has no HF tensor).
    if (s.arch == "qwen3next") s.fused_qkvz = true;
    gguf::Writer w;
    const int64_t params = build_random_model(s, vocab, w);
    const auto view = w.view(dir);
    hf::write_hf_folder(*view, dir, shards, s.hf_class);
    // Gemma 4's tokenizer model (SentencePiece-style BPE split at newlines) has no tokenizer.json form
    // here yet: its folder is written with the weights and config.json only.
    if (view->get_string_or("tokenizer.ggml.model", "") == "gemma4") return params;
    tokenizer::write_hf_tokenizer(dir, tokenizer::vocab_spec_from_gguf(*view),
                                  view->get_string_or("tokenizer.chat_template", ""));
    return params;
}

namespace {

int64_t build_random_llama_family(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w);

// The attention temperature goes where llama.cpp reads it (random_model.h), with a beta that is a number.
void check_attn_temperature(const RandomModelSpec& s) {
    if (!s.attn_temperature_scale && s.attn_temperature_length == 0) return;
    if (s.arch != "deepseek2" && s.arch != "mistral3")
        fail("gen-model: --attn-temperature-scale / --attn-temperature-length are for --arch deepseek2 or mistral3 (the "
             "architectures that read attention.temperature_scale), not {}", s.arch);
    if (s.attn_temperature_length != 0 && s.arch == "mistral3")
        fail("gen-model: --attn-temperature-length is for --arch deepseek2 (mistral3's length is its "
             "rope.scaling.original_context_length, a quarter of --ctx)");
    if (s.attn_temperature_length != 0 && !s.attn_temperature_scale)
        fail("gen-model: --attn-temperature-length needs --attn-temperature-scale");
    if (s.attn_temperature_length < 0 || s.attn_temperature_length > INT32_MAX)
        fail("gen-model: the attention temperature length {} is out of range", s.attn_temperature_length);
    if (s.attn_temperature_scale && !(std::isfinite(*s.attn_temperature_scale) && *s.attn_temperature_scale >= 0))
        fail("gen-model: the attention temperature scale {} is not a non-negative number", *s.attn_temperature_scale);
}

// gen-model's writer of each architecture of arch/arch_description.h's table (the model tests check
// that every description has one).
using RandomWriter = int64_t (*)(const RandomModelSpec&, const gguf::File*, gguf::Writer&);
struct WriterEntry {
    const char* arch;
    RandomWriter write;
};
constexpr WriterEntry kWriters[] = {
    {"llama", build_random_llama_family},    {"qwen2", build_random_llama_family},
    {"qwen3", build_random_llama_family},    {"qwen3vl", build_random_llama_family},
    {"qwen2moe", build_random_llama_family},
    {"qwen3moe", build_random_llama_family}, {"gemma2", build_random_llama_family},
    {"gemma3", build_random_llama_family},   {"gemma4", build_random_gemma4},
    {"phi3", build_random_llama_family},     {"gpt-oss", build_random_gpt_oss},
    {"deepseek2", build_random_deepseek2},   {"glm4moe", build_random_glm},
    {"glm4", build_random_glm},              {"smollm3", build_random_llama_family},
    {"mistral3", build_random_llama_family}, {"qwen35", build_random_qwen35},
    {"qwen35moe", build_random_qwen35},      {"qwen3next", build_random_qwen35},
    {"minimax-m2", build_random_minimax_m2}, {"bert", build_random_bert},
    {"nomic-bert", build_random_bert},       {"jina-bert-v2", build_random_bert},
};

RandomWriter writer_of(std::string_view arch) {
    for (const WriterEntry& e : kWriters)
        if (arch == e.arch) return e.write;
    return nullptr;
}

}  // namespace

std::vector<std::string> random_model_architectures() {
    std::vector<std::string> out;  // in the description table's order
    for (const arch::ArchDescription& d : arch::architectures())
        if (writer_of(d.name)) out.emplace_back(d.name);
    return out;
}

RopeSections qwen3vl_rope_sections(int64_t pairs) {
    const int64_t side = std::max<int64_t>(1, pairs * 5 / 16);
    return {.t = pairs - 2 * side, .h = side, .w = side};
}

int64_t qwen3vl_deepstack_layers(int64_t n_layers) { return std::clamp<int64_t>(n_layers - 1, 0, 3); }

int64_t build_random_model(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    const RandomWriter write = arch::find_architecture(s.arch) ? writer_of(s.arch) : nullptr;
    if (!write)
        fail("gen-model: architecture '{}' is not supported ({})", s.arch, fmt::join(random_model_architectures(), ", "));
    check_attn_temperature(s);
    return write(s, vocab, w);
}

namespace {

// The llama family's layers (llama, qwen2, qwen3, their MoEs, gemma2, gemma3, phi3, smollm3, mistral3):
// which tensors a layer gets follows the architecture's tensor manifest (arch/arch_description.h).
int64_t build_random_llama_family(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    if (s.mxfp4_experts) fail("gen-model: MXFP4 experts are written for gpt-oss only");
    const arch::ArchDescription& d = *arch::find_architecture(s.arch);
    const bool moe_arch = d.experts == arch::Has::yes;
    const bool gemma = s.arch == "gemma2" || s.arch == "gemma3", phi3 = s.arch == "phi3";
    const auto required = [&](std::string_view name) {
        const arch::TensorEntry* t = d.layer_tensor(name);
        return t && t->presence == arch::Presence::required;
    };
    const bool fused_qkv = !required("attn_q.weight"), fused_gate_up = !d.has_layer_tensor("ffn_gate.weight");
    const bool qkv_bias = required("attn_q.bias"), qk_norm = required("attn_q_norm.weight");
    const bool sandwich = required("post_attention_norm.weight"), post_ffw = required("post_ffw_norm.weight");
    const bool shared_expert = d.has_layer_tensor("ffn_gate_inp_shexp.weight");
    const bool qwen3vl = s.arch == "qwen3vl";
    if (s.n_experts > 0 && d.experts == arch::Has::no)
        fail("gen-model: experts are written for llama, qwen2moe and qwen3moe, not {}", s.arch);
    if (moe_arch || s.n_experts > 0) random_detail::check_expert_spec(s.arch, s.n_experts, s.n_experts_used);
    const int64_t expert_ffn = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    const int64_t shared_ffn = s.shared_expert_ffn_dim > 0 ? s.shared_expert_ffn_dim : 2 * expert_ffn;
    if (!s.rope_scaling.empty() &&
        (!d.allows_rope_scaling("llama3") || (s.rope_scaling != "llama3" && s.rope_scaling != "llama3_keys")))
        fail("gen-model: RoPE scaling '{}' is not available for {} (llama: llama3)", s.rope_scaling, s.arch);
    if (s.sliding_window < 0 || s.swa_period < 0) fail("gen-model: the sliding window and its period must not be negative");
    random_detail::check_decoder_sizes(s);
    const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    if (s.head_dim == 0 && s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    if (head_dim % 2) fail("gen-model: the head size {} must be even for RoPE", head_dim);
    if (!s.rank_head.empty() && s.rank_head != "output" && s.rank_head != "dense")
        fail("gen-model: the rank head is 'output' or 'dense', not '{}'", s.rank_head);
    if (s.rank_classes < 0 || (s.rank_classes > 0 && s.rank_head.empty()))
        fail("gen-model: rank classes (--rank-classes) need a rank head (--rank-head) and must be positive");

    const std::string a = s.arch + ".";
    w.set("general.architecture", Value::string(s.arch));
    w.set("general.name", Value::string(s.name));
    w.set(a + "context_length", Value::u32(uint32_t(s.context_length)));
    w.set(a + "embedding_length", Value::u32(uint32_t(s.dim)));
    w.set(a + "block_count", Value::u32(uint32_t(s.n_layers)));
    w.set(a + "feed_forward_length", Value::u32(uint32_t(s.n_experts > 0 && !moe_arch ? expert_ffn : s.ffn_dim)));
    if (s.n_experts > 0) {  // the keys llama.cpp's converters write (Mixtral: feed_forward_length only)
        w.set(a + "expert_count", Value::u32(uint32_t(s.n_experts)));
        w.set(a + "expert_used_count", Value::u32(uint32_t(s.n_experts_used)));
        if (moe_arch) w.set(a + "expert_feed_forward_length", Value::u32(uint32_t(expert_ffn)));
        if (shared_expert) w.set(a + "expert_shared_feed_forward_length", Value::u32(uint32_t(shared_ffn)));
    }
    w.set(a + "attention.head_count", Value::u32(uint32_t(s.n_heads)));
    w.set(a + "attention.head_count_kv", Value::u32(uint32_t(s.n_kv_heads)));
    if (s.head_dim > 0) {
        w.set(a + "attention.key_length", Value::u32(uint32_t(head_dim)));
        w.set(a + "attention.value_length", Value::u32(uint32_t(head_dim)));
    }
    w.set(a + "attention.layer_norm_rms_epsilon", Value::f32(1e-5f));
    w.set(a + "rope.freq_base", Value::f32(s.rope_theta));
    w.set(a + "rope.dimension_count", Value::u32(uint32_t(head_dim)));
    const int64_t original_context = s.original_context > 0 ? s.original_context : std::max<int64_t>(1, s.context_length / 4);
    if (gemma || (phi3 && s.sliding_window > 0))
        w.set(a + "attention.sliding_window",
              Value::u32(uint32_t(s.sliding_window > 0 ? s.sliding_window : s.arch == "gemma2" ? 4096 : 512)));
    if (s.swa_period > 0) w.set(a + "attention.sliding_window_pattern", Value::u32(uint32_t(s.swa_period)));
    if (s.arch == "gemma2") {
        w.set(a + "attn_logit_softcapping", Value::f32(s.attn_softcap));
        w.set(a + "final_logit_softcapping", Value::f32(s.final_softcap));
    }
    if (s.arch == "gemma3") w.set(a + "rope.freq_base_swa", Value::f32(10000.0f));
    if (qwen3vl) {  // Qwen3-VL's keys: interleaved M-RoPE sections and the deep-stack layers
        const auto [t, h, w_] = qwen3vl_rope_sections(head_dim / 2);
        w.set(a + "rope.dimension_sections", Value::i32s({int32_t(t), int32_t(h), int32_t(w_), 0}));
        w.set(a + "n_deepstack_layers", Value::u32(uint32_t(qwen3vl_deepstack_layers(s.n_layers))));
    }
    if (s.arch == "mistral3") {  // Ministral 3's form, as the converter writes it: YaRN and llama 4's temperature
        w.set(a + "rope.scaling.type", Value::string("yarn"));
        w.set(a + "rope.scaling.factor", Value::f32(16.0f));
        w.set(a + "rope.scaling.original_context_length", Value::u32(uint32_t(original_context)));
        w.set(a + "rope.scaling.yarn_beta_fast", Value::f32(32.0f));
        w.set(a + "rope.scaling.yarn_beta_slow", Value::f32(1.0f));
        w.set(a + "rope.scaling.yarn_log_multiplier", Value::f32(1.0f));
        w.set(a + "attention.temperature_scale", Value::f32(s.attn_temperature_scale.value_or(0.1f)));
    }
    Llama3RopeScaling llama3;
    llama3.original_context = original_context;
    if (s.rope_scaling == "llama3_keys") {
        w.set(a + "rope.scaling.type", Value::string("llama3"));
        w.set(a + "rope.scaling.factor", Value::f32(float(llama3.factor)));
        w.set(a + "rope.scaling.low_freq_factor", Value::f32(float(llama3.low_freq_factor)));
        w.set(a + "rope.scaling.high_freq_factor", Value::f32(float(llama3.high_freq_factor)));
        w.set(a + "rope.scaling.original_context_length", Value::u32(uint32_t(original_context)));
    }
    if (phi3) {  // LongRoPE as llama.cpp's converter writes it
        w.set(a + "rope.scaling.original_context_length", Value::u32(uint32_t(original_context)));
        const double scale = double(s.context_length) / double(original_context);
        const double attn_factor = scale > 1 && original_context > 1
                                       ? std::sqrt(1 + std::log(scale) / std::log(double(original_context))) : 1.0;
        w.set(a + "rope.scaling.attn_factor", Value::f32(float(attn_factor)));
    }
    random_detail::write_file_type(w, s.type);

    const int64_t vocab_size = write_vocab(w, vocab, s.vocab_size, s.fim_tokens, s.image_tokens,
                                         qwen3vl ? ImageTokenSet::qwen_vl : ImageTokenSet::gemma3);

    Rng rng(s.seed);
    const int64_t q_dim = s.n_heads * head_dim, kv_dim = s.n_kv_heads * head_dim;
    const float out_scale = 1.0f / std::sqrt(2.0f * float(s.n_layers));
    random_detail::TensorAdder add(w, rng, s.type);
    auto around_one = [&](int64_t n) {  // norm weights (Gemma's as stored: 1 + w already folded in)
        std::vector<uint8_t> bytes = random_tensor(rng, n, 0.2f, GgmlType::F32);
        for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(bytes.data())[i] += 1.0f;
        return bytes;
    };
    // Gemma scales the embedding by sqrt(dim) and ties the head: rows of std 1 / sqrt(dim) give a
    // unit-scale residual stream and logits of std ~1 before the cap.
    if (!(s.embed_scale > 0) || !std::isfinite(s.embed_scale))
        fail("the embedding scale must be a positive number, got {}", s.embed_scale);
    add.matrix("token_embd.weight", s.dim, vocab_size, (gemma ? 1.0f / std::sqrt(float(s.dim)) : 1.0f) * s.embed_scale);
    add.f32("output_norm.weight", {s.dim}, constant_f32(s.dim, 1.0f));
    if (!s.tied_output && !gemma) add.matrix("output.weight", s.dim, vocab_size, 1.0f / std::sqrt(float(s.dim)));
    if (s.rope_scaling == "llama3") {
        const std::vector<float> f = llama3_rope_factors(llama3, s.rope_theta, head_dim);
        w.add_tensor("rope_freqs.weight", GgmlType::F32, {int64_t(f.size())},
                     std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(f.data()),
                                          reinterpret_cast<const uint8_t*>(f.data() + f.size())));
    }
    if (phi3) {  // per-frequency divisors: short ones near 1, long ones growing with the wavelength
        std::vector<float> short_f, long_f;
        for (int64_t i = 0; i < head_dim / 2; ++i) {
            const float t = float(i) / float(std::max<int64_t>(1, head_dim / 2 - 1));
            short_f.push_back(1.0f + 0.1f * t);
            long_f.push_back(1.0f + 7.0f * t * t);
        }
        for (auto& [name, f] : {std::pair{"rope_factors_short.weight", &short_f}, std::pair{"rope_factors_long.weight", &long_f}})
            w.add_tensor(name, GgmlType::F32, {int64_t(f->size())},
                         std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(f->data()),
                                              reinterpret_cast<const uint8_t*>(f->data() + f->size())));
    }
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add.f32(p + "attn_norm.weight", {s.dim}, gemma ? around_one(s.dim) : constant_f32(s.dim, 1.0f));
        if (fused_qkv) {
            add.matrix(p + "attn_qkv.weight", s.dim, q_dim + 2 * kv_dim, 1.0f / std::sqrt(float(s.dim)));
        } else {
            add.matrix(p + "attn_q.weight", s.dim, q_dim, 1.0f / std::sqrt(float(s.dim)));
            add.matrix(p + "attn_k.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
            add.matrix(p + "attn_v.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        }
        if (qkv_bias) {
            add.f32(p + "attn_q.bias", {q_dim}, random_tensor(rng, q_dim, 0.1f, GgmlType::F32));
            add.f32(p + "attn_k.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
            add.f32(p + "attn_v.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
        }
        if (qk_norm) {  // per-head RMSNorm weights of Q and K, around 1
            add.f32(p + "attn_q_norm.weight", {head_dim}, around_one(head_dim));
            add.f32(p + "attn_k_norm.weight", {head_dim}, around_one(head_dim));
        }
        add.matrix(p + "attn_output.weight", q_dim, s.dim, out_scale / std::sqrt(float(q_dim)));
        // Gemma's post-norms rescale each block's output to unit RMS, times these weights. The
        // head is the embedding itself (tied), so a residual stream led by the token's own embedding
        // would make greedy steps repeat their input: weights of 8 let the blocks lead it.
        if (sandwich) add.f32(p + "post_attention_norm.weight", {s.dim}, constant_f32(s.dim, kGemmaPostNorm));
        add.f32(p + "ffn_norm.weight", {s.dim}, gemma ? around_one(s.dim) : constant_f32(s.dim, 1.0f));
        if (s.n_experts > 0) {
            add.router(p, s.dim, s.n_experts);
            add.swiglu_experts(p, s.dim, expert_ffn, s.n_experts, out_scale);
            if (shared_expert) {
                add.f32(p + "ffn_gate_inp_shexp.weight", {s.dim}, random_tensor(rng, s.dim, 1.0f / std::sqrt(float(s.dim)), GgmlType::F32));
                add.swiglu(p, "_shexp", s.dim, shared_ffn, out_scale);
            }
            continue;
        }
        if (fused_gate_up) {
            add.matrix(p + "ffn_up.weight", s.dim, 2 * s.ffn_dim, 1.0f / std::sqrt(float(s.dim)));
            add.matrix(p + "ffn_down.weight", s.ffn_dim, s.dim, out_scale / std::sqrt(float(s.ffn_dim)));
        } else {
            add.swiglu(p, "", s.dim, s.ffn_dim, out_scale);
        }
        if (post_ffw) add.f32(p + "post_ffw_norm.weight", {s.dim}, constant_f32(s.dim, kGemmaPostNorm));
    }
    if (!s.rank_head.empty()) {  // after every other tensor: the same seed keeps the rest of the model
        const int64_t classes = s.rank_classes > 0 ? s.rank_classes : s.arch == "qwen3" ? 2 : 1;
        w.set(a + "pooling_type", Value::u32(4));
        std::vector<std::string> labels;
        for (int64_t c = 0; c < classes; ++c)
            labels.push_back(s.arch == "qwen3" && classes == 2 ? (c == 0 ? "yes" : "no") : fmt::format("LABEL_{}", c));
        w.set(a + "classifier.output_labels", Value::strings(labels));
        int64_t width = s.dim;
        if (s.rank_head == "dense") {
            add.matrix("cls.weight", s.dim, s.dim, 1.0f / std::sqrt(float(s.dim)));
            add.f32("cls.bias", {s.dim}, random_tensor(rng, s.dim, 0.5f, GgmlType::F32));
        }
        add.matrix("cls.output.weight", width, classes, 1.0f / std::sqrt(float(width)));
        add.f32("cls.output.bias", {classes}, random_tensor(rng, classes, 0.5f, GgmlType::F32));
    }
    return add.params();
}

}  // namespace

}  // namespace pagoda::model
