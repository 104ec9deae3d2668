// NomicBertModel config.json and tensor names <-> GGUF `nomic-bert`, as hf_nomic_bert.h says.
#include "hf/hf_nomic_bert.h"

#include <fmt/format.h>

#include "core/error.h"
#include "hf/config_reader.h"
#include "hf/hf_name_pairs.h"

namespace pagoda::hf {
namespace {

using detail::Config;
using gguf::Value;

using Pair = detail::NamePair;
constexpr Pair kTop[] = {{"embeddings.word_embeddings", "token_embd"},
                         {"embeddings.token_type_embeddings", "token_types"},
                         {"emb_ln", "token_embd_norm"}};
constexpr Pair kLayer[] = {{"attn.Wqkv", "attn_qkv"},   {"attn.out_proj", "attn_output"}, {"norm1", "attn_output_norm"},
                           {"mlp.fc11", "ffn_up"},      {"mlp.fc12", "ffn_gate"},        {"mlp.fc2", "ffn_down"},
                           {"norm2", "layer_output_norm"}};

std::optional<TensorTarget> match(const HfModel& m, std::string_view rest) {
    if (auto name = detail::gguf_name_of(kTop, kLayer, "encoder.layers.", m.n_layers, rest)) return TensorTarget{*name};
    return std::nullopt;
}

void require(const Config& c, const char* key, bool ok, const std::string& why) {
    if (!ok) c.refuse(key, why);
}

}  // namespace

HfModel read_hf_nomic_config(const nlohmann::json& root, const std::string& name) {
    const Config c(root, name, "");
    HfModel m;
    m.hf_arch = "NomicBertModel";
    m.arch = "nomic-bert";
    m.encoder = true;
    m.tied = true;  // no output head: the output is the hidden state
    m.prefixes = {"", "bert."};

    m.n_layers = c.positive("n_layer");
    const int64_t dim = c.positive("n_embd");
    m.n_heads = c.positive("n_head");
    if (dim % m.n_heads) c.refuse("n_embd", "is not a multiple of n_head");
    m.n_kv_heads = m.n_heads;
    m.head_dim = dim / m.n_heads;
    const std::string act = c.string_or("activation_function", "swiglu");
    require(c, "activation_function", act == "swiglu", "is '" + act + "', but pagoda's nomic-bert builder computes swiglu");
    require(c, "causal", !c.boolean_or("causal", false), "is true: pagoda reads NomicBertModel as a bidirectional encoder");
    require(c, "prenorm", !c.boolean_or("prenorm", false), "is true, but nomic-bert normalises after each block");
    for (const char* bias : {"qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias"})
        require(c, bias, !c.boolean_or(bias, false), "is true, but nomic-bert has no biases");
    require(c, "use_rms_norm", !c.boolean_or("use_rms_norm", false), "is true, but nomic-bert uses LayerNorm");
    require(c, "parallel_block", !c.boolean_or("parallel_block", false), "is true, but nomic-bert's blocks are sequential");
    require(c, "moe_every_n_layers", !c.has("moe_every_n_layers") || c.integer("moe_every_n_layers") == 0,
            "is set: nomic-bert-moe is not a model pagoda reads");
    require(c, "rotary_emb_fraction", c.number_or("rotary_emb_fraction", 1.0) == 1.0,
            "is not 1.0, but pagoda rotates every dimension of a nomic-bert head");
    require(c, "rotary_emb_interleaved", !c.boolean_or("rotary_emb_interleaved", false),
            "is true, but nomic-bert's RoPE rotates halves (NEOX)");
    require(c, "rotary_emb_scale_base", !c.has("rotary_emb_scale_base"), "is set, but pagoda has no xPos scaling");
    require(c, "rotary_scaling_factor", !c.has("rotary_scaling_factor"), "is set, but pagoda has no dynamic NTK scaling");
    const double base = c.number("rotary_emb_base");
    if (!(base > 0)) c.refuse("rotary_emb_base", "must be positive");
    const int64_t context = c.has("max_trained_positions") ? c.positive("max_trained_positions") : c.positive("n_positions");
    const double eps = c.number("layer_norm_epsilon");
    if (!(eps > 0 && eps < 1)) c.refuse("layer_norm_epsilon", "must be in (0, 1)");

    auto& md = m.metadata;
    md.emplace_back("general.architecture", Value::string("nomic-bert"));
    md.emplace_back("general.name", Value::string(root.value("_name_or_path", std::string())));
    md.emplace_back("nomic-bert.context_length", Value::u32(uint32_t(context)));
    md.emplace_back("nomic-bert.embedding_length", Value::u32(uint32_t(dim)));
    md.emplace_back("nomic-bert.feed_forward_length", Value::u32(uint32_t(c.positive("n_inner"))));
    md.emplace_back("nomic-bert.block_count", Value::u32(uint32_t(m.n_layers)));
    md.emplace_back("nomic-bert.attention.head_count", Value::u32(uint32_t(m.n_heads)));
    md.emplace_back("nomic-bert.attention.layer_norm_epsilon", Value::f32(float(eps)));
    md.emplace_back("nomic-bert.attention.causal", Value::boolean(false));
    md.emplace_back("nomic-bert.rope.freq_base", Value::f32(float(base)));
    md.emplace_back("tokenizer.ggml.token_type_count", Value::u32(uint32_t(c.positive_or("type_vocab_size", 2))));
    return m;
}

std::string hf_nomic_config_json(const gguf::File& f, const std::string& torch_dtype) {
    if (f.get_string("general.architecture") != "nomic-bert")
        fail("{}: architecture '{}' is not nomic-bert", f.name(), f.get_string("general.architecture"));
    if (f.get_bool_or("nomic-bert.attention.causal", false))
        fail("{}: nomic-bert.attention.causal is true; NomicBertModel is bidirectional", f.name());
    for (const char* bias : {"blk.0.attn_qkv.bias", "blk.0.ffn_up.bias", "blk.0.ffn_down.bias", "blk.0.attn_output.bias"})
        if (f.find_tensor(bias)) fail("{}: tensor {} has no place in NomicBertModel, which has no biases", f.name(), bias);
    const int64_t context = f.get_int("nomic-bert.context_length");
    nlohmann::json j;
    j["architectures"] = {"NomicBertModel"};
    j["model_type"] = "nomic_bert";
    j["_name_or_path"] = f.get_string_or("general.name", "");
    j["n_embd"] = f.get_int("nomic-bert.embedding_length");
    j["n_layer"] = f.get_int("nomic-bert.block_count");
    j["n_head"] = f.get_int("nomic-bert.attention.head_count");
    j["n_inner"] = f.get_int("nomic-bert.feed_forward_length");
    j["n_positions"] = context;
    j["max_trained_positions"] = context;
    j["activation_function"] = "swiglu";
    j["causal"] = false;
    j["prenorm"] = false;
    j["qkv_proj_bias"] = false;
    j["mlp_fc1_bias"] = false;
    j["mlp_fc2_bias"] = false;
    j["rotary_emb_fraction"] = 1.0;
    j["rotary_emb_interleaved"] = false;
    j["rotary_emb_scale_base"] = nullptr;
    j["rotary_scaling_factor"] = nullptr;
    // The f32s' shortest decimals, which read back to the same f32s.
    j["rotary_emb_base"] = std::stod(fmt::format("{}", float(f.get_float("nomic-bert.rope.freq_base"))));
    j["layer_norm_epsilon"] =
        std::stod(fmt::format("{}", float(f.get_float_or("nomic-bert.attention.layer_norm_epsilon", 1e-12))));
    if (const auto* e = f.find_tensor("token_embd.weight")) j["vocab_size"] = e->shape.size() == 2 ? e->shape[1] : 0;
    const gguf::TensorInfo* types = f.find_tensor("token_types.weight");
    j["type_vocab_size"] = types && types->shape.size() == 2 ? types->shape[1] : f.get_int_or("tokenizer.ggml.token_type_count", 2);
    j["torch_dtype"] = torch_dtype;
    return j.dump(2) + "\n";
}

std::optional<TensorTarget> nomic_gguf_target(const HfModel& m, std::string_view name) {
    return detail::target_under_prefixes(
        m, name, [&](std::string_view rest) { return match(m, rest); },
        [](std::string_view rest) { return rest == "embeddings.position_ids"; });
}

HfSource nomic_hf_source(const HfModel&, const std::string& name) {
    if (auto hf = detail::hf_name_of(kTop, kLayer, "encoder.layers.", name)) return {{*hf}};
    fail("tensor '{}' has no Hugging Face name for NomicBertModel", name);
}

}  // namespace pagoda::hf
