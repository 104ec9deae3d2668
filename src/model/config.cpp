#include "model/config.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace pagoda::model {

std::string ModelConfig::describe() const {
    return fmt::format("{} '{}': {} layers, dim {}, {} heads ({} KV, head dim {}), FFN {}, vocab {}, "
                       "context {}, RoPE {} theta {} dims {}{}", arch, name, n_layers, dim, n_heads,
                       n_kv_heads, head_dim, ffn_dim, vocab_size, context_length,
                       rope_style == RopeStyle::neox ? "neox" : "normal", rope_theta, rope_dims,
                       qkv_bias ? ", QKV bias" : "");
}

ModelConfig read_config(const gguf::File& f) {
    ModelConfig c;
    c.arch = f.get_string_or("general.architecture", "");
    if (c.arch.empty()) fail("{}: no general.architecture key: not a model file", f.name());
    const auto& supported = supported_architectures();
    if (std::find(supported.begin(), supported.end(), c.arch) == supported.end())
        fail("{}: architecture '{}' is not supported (supported: {})", f.name(), c.arch, fmt::join(supported, ", "));
    c.name = f.get_string_or("general.name", "");
    const std::string a = c.arch + ".";
    auto positive = [&](const std::string& key) {
        int64_t v = f.get_int(key);
        if (v <= 0 || v > (int64_t(1) << 24)) fail("{}: {} = {} is out of range", f.name(), key, v);
        return v;
    };
    c.n_layers = positive(a + "block_count");
    c.dim = positive(a + "embedding_length");
    c.n_heads = positive(a + "attention.head_count");
    c.n_kv_heads = f.has(a + "attention.head_count_kv") ? positive(a + "attention.head_count_kv") : c.n_heads;
    c.ffn_dim = positive(a + "feed_forward_length");
    c.context_length = f.has(a + "context_length") ? positive(a + "context_length") : 2048;
    if (c.n_heads % c.n_kv_heads != 0)
        fail("{}: {} attention heads are not a multiple of {} KV heads", f.name(), c.n_heads, c.n_kv_heads);
    if (f.has(a + "attention.key_length")) {
        c.head_dim = positive(a + "attention.key_length");
        int64_t vlen = f.has(a + "attention.value_length") ? positive(a + "attention.value_length") : c.head_dim;
        if (vlen != c.head_dim)
            fail("{}: key length {} differs from value length {}: not supported", f.name(), c.head_dim, vlen);
    } else {
        if (c.dim % c.n_heads != 0)
            fail("{}: embedding width {} is not a multiple of {} heads", f.name(), c.dim, c.n_heads);
        c.head_dim = c.dim / c.n_heads;
    }
    c.rms_eps = float(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
    if (!(c.rms_eps > 0 && c.rms_eps < 1)) fail("{}: RMS norm epsilon {} is out of range", f.name(), c.rms_eps);
    c.rope_theta = float(f.get_float_or(a + "rope.freq_base", 10000.0));
    if (!(c.rope_theta > 1)) fail("{}: RoPE base {} is out of range", f.name(), c.rope_theta);
    c.rope_dims = f.has(a + "rope.dimension_count") ? positive(a + "rope.dimension_count") : c.head_dim;
    if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
        fail("{}: RoPE dimension count {} must be even and at most the head size {}", f.name(), c.rope_dims,
             c.head_dim);
    std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
    double factor = f.get_float_or(a + "rope.scaling.factor", 0.0);
    if (f.has(a + "rope.scale_linear")) {  // older files
        scaling = "linear";
        factor = f.get_float(a + "rope.scale_linear");
    }
    if (scaling == "linear") {
        if (!(factor > 0)) fail("{}: linear RoPE scaling factor {} is out of range", f.name(), factor);
        c.rope_linear_scale = float(factor);
    } else if (scaling == "llama3" && c.arch == "llama") {
        c.rope_scaling = scaling;  // the builder computes the frequency factors (rope_frequencies.h)
    } else if (scaling == "longrope" && c.arch == "phi3") {
        c.rope_scaling = scaling;  // the factors are tensors (phi3_rope.h)
    } else if (scaling != "none") {
        fail("{}: RoPE scaling type '{}' is not supported for {} (supported: none, linear{})", f.name(), scaling,
             c.arch, c.arch == "llama" ? ", llama3" : c.arch == "phi3" ? ", longrope" : "");
    }
    const bool neox = c.arch == "qwen2" || c.arch == "qwen3" || c.arch == "gemma2" || c.arch == "gemma3" || c.arch == "phi3";
    c.rope_style = neox ? RopeStyle::neox : RopeStyle::normal;
    c.qkv_bias = c.arch == "qwen2";
    const auto* embd = f.find_tensor("token_embd.weight");
    if (!embd) fail("{}: tensor token_embd.weight is missing", f.name());
    if (embd->shape.size() != 2) fail("{}: token_embd.weight must be 2-D", f.name());
    c.vocab_size = embd->shape[1];
    return c;
}

}  // namespace pagoda::model
