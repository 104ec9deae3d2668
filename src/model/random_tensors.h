// The parts of gen-model's writers (random_model.h): a portable generator and uniform values of a
// given spread in F32 / F16 / BF16, the spec checks and metadata keys the writers share, what an
// architecture's layers hold (its description's tensor manifest, arch/arch_description.h: writers
// choose tensors by it, not by architecture names), and the tensor writers (TensorAdder: norms,
// routers, SwiGLU FFNs and experts, NextN blocks) that draw from one generator in call order.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "arch/arch_description.h"
#include "core/error.h"
#include "core/half.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "model/random_model.h"

namespace pagoda::model::random_detail {

using gguf::GgmlType;

// xoshiro256** seeded by splitmix64: fast, good quality, and identical on every platform.
class Rng {
public:
    explicit Rng(uint64_t seed) {
        for (auto& s : s_) {
            seed += 0x9e3779b97f4a7c15ull;
            uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            s = z ^ (z >> 31);
        }
    }
    uint64_t next() {
        uint64_t result = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
        s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3]; s_[2] ^= t; s_[3] = rotl(s_[3], 45);
        return result;
    }
    // Uniform in [-1, 1).
    float symmetric() { return float(int64_t(next() >> 11) - (int64_t(1) << 52)) * (1.0f / float(int64_t(1) << 52)); }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

// Uniform values with the requested standard deviation, stored in `type`.
inline std::vector<uint8_t> random_tensor(Rng& rng, int64_t n, float stddev, GgmlType type) {
    const float a = stddev * std::sqrt(3.0f);
    std::vector<uint8_t> bytes;
    if (type == GgmlType::F32) {
        bytes.resize(size_t(n) * 4);
        float* p = reinterpret_cast<float*>(bytes.data());
        for (int64_t i = 0; i < n; ++i) p[i] = a * rng.symmetric();
    } else if (type == GgmlType::F16 || type == GgmlType::BF16) {
        bytes.resize(size_t(n) * 2);
        uint16_t* p = reinterpret_cast<uint16_t*>(bytes.data());
        for (int64_t i = 0; i < n; ++i) {
            float v = a * rng.symmetric();
            p[i] = type == GgmlType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        }
    } else {
        fail("gen-model writes F32, F16 or BF16 weights (quantise afterwards with `pagoda quantize`)");
    }
    return bytes;
}

// gen-model's expert counts for an architecture whose FFNs are experts (gpt-oss, deepseek2, glm4moe):
// an error naming the architecture or the out-of-range count.
inline void check_expert_spec(const std::string& arch, int64_t n_experts, int64_t n_experts_used) {
    if (n_experts <= 0) fail("gen-model: {} needs experts (--experts N)", arch);
    if (n_experts_used < 1 || n_experts_used > n_experts)
        fail("gen-model: {} experts used of {} is out of range", n_experts_used, n_experts);
}

// The sizes every decoder writer needs: positive layer, width, head and FFN counts, and query heads
// that share the KV heads evenly.
inline void check_decoder_sizes(const RandomModelSpec& s) {
    if (s.n_layers <= 0 || s.dim <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.ffn_dim <= 0)
        fail("gen-model: every size must be positive");
    if (s.n_heads % s.n_kv_heads) fail("gen-model: {} heads are not a multiple of {} KV heads", s.n_heads, s.n_kv_heads);
}

// The keys llama.cpp's converters write first for a decoder, in their order: architecture, name,
// block count, context length, width, FFN width, heads, KV heads, RoPE base, RMS norm epsilon.
struct DecoderHeader {
    std::string arch;
    int64_t blocks = 0, ffn_dim = 0, kv_heads = 0;
    float rms_eps = 0;
};

inline void write_decoder_header(const RandomModelSpec& s, const DecoderHeader& h, gguf::Writer& w) {
    const std::string a = h.arch + ".";
    w.set("general.architecture", gguf::Value::string(h.arch));
    w.set("general.name", gguf::Value::string(s.name));
    w.set(a + "block_count", gguf::Value::u32(uint32_t(h.blocks)));
    w.set(a + "context_length", gguf::Value::u32(uint32_t(s.context_length)));
    w.set(a + "embedding_length", gguf::Value::u32(uint32_t(s.dim)));
    w.set(a + "feed_forward_length", gguf::Value::u32(uint32_t(h.ffn_dim)));
    w.set(a + "attention.head_count", gguf::Value::u32(uint32_t(s.n_heads)));
    w.set(a + "attention.head_count_kv", gguf::Value::u32(uint32_t(h.kv_heads)));
    w.set(a + "rope.freq_base", gguf::Value::f32(s.rope_theta));
    w.set(a + "attention.layer_norm_rms_epsilon", gguf::Value::f32(h.rms_eps));
}

// general.file_type as llama.cpp numbers it for the matrices' type: 0 all F32, 1 mostly F16, 32 mostly BF16.
inline void write_file_type(gguf::Writer& w, GgmlType type) {
    w.set("general.file_type", gguf::Value::u32(type == GgmlType::F32 ? 0 : type == GgmlType::F16 ? 1 : 32));
}

// The keys of a model with routed experts, f wide.
inline void write_expert_keys(const RandomModelSpec& s, int64_t f, gguf::Writer& w) {
    const std::string a = s.arch + ".";
    w.set(a + "expert_count", gguf::Value::u32(uint32_t(s.n_experts)));
    w.set(a + "expert_used_count", gguf::Value::u32(uint32_t(s.n_experts_used)));
    w.set(a + "expert_feed_forward_length", gguf::Value::u32(uint32_t(f)));
}

// What the architecture's layers hold, from its tensor manifest (arch/arch_description.h): the
// writers choose a layer's tensors by these, not by architecture names.
struct LayerManifest {
    const arch::ArchDescription& d;
    explicit LayerManifest(const std::string& arch) : d(*arch::find_architecture(arch)) {}
    bool has(std::string_view name) const { return d.has_layer_tensor(name); }
    // In every layer (of its kind: presence required).
    bool required(std::string_view name) const {
        const arch::TensorEntry* t = d.layer_tensor(name);
        return t && t->presence == arch::Presence::required;
    }
    bool experts() const { return d.experts == arch::Has::yes; }
};

// A family with a dense and an experts architecture (glm4 / glm4moe, qwen35 / qwen35moe): the one
// whose description has experts needs valid expert counts, the dense one takes none. Returns whether
// s's architecture is the experts one.
inline bool check_dense_or_experts(const RandomModelSpec& s, const LayerManifest& m) {
    if (m.experts()) check_expert_spec(s.arch, s.n_experts, s.n_experts_used);
    if (!m.experts() && s.n_experts > 0) fail("gen-model: {} is dense (it takes no --experts)", s.arch);
    return m.experts();
}

inline std::vector<uint8_t> constant_f32(int64_t n, float value) {
    std::vector<uint8_t> bytes(size_t(n) * 4);
    float* p = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < n; ++i) p[i] = value;
    return bytes;
}

// A generator's tensor writers: each adds one tensor to `w` (random values of the spec's type from
// `rng`, consumed in call order, or given F32 bytes) and counts its parameters for gen-model's report.
class TensorAdder {
public:
    TensorAdder(gguf::Writer& w, Rng& rng, GgmlType type) : w_(w), rng_(rng), type_(type) {}
    void matrix(const std::string& name, int64_t cols, int64_t rows, float stddev) {
        w_.add_tensor(name, type_, {cols, rows}, random_tensor(rng_, cols * rows, stddev, type_));
        params_ += cols * rows;
    }
    void f32(const std::string& name, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        w_.add_tensor(name, GgmlType::F32, std::move(shape), std::move(bytes));
        params_ += n;
    }
    // Norm weights near 1 but not 1, so a norm bound to the wrong vector shows.
    void norm(const std::string& name, int64_t n) {
        std::vector<uint8_t> bytes = random_tensor(rng_, n, 0.1f, GgmlType::F32);
        float* p = reinterpret_cast<float*>(bytes.data());
        for (int64_t i = 0; i < n; ++i) p[i] += 1.0f;
        f32(name, {n}, std::move(bytes));
    }
    // Stacked experts [cols, rows, n_experts] of the spec's type.
    void experts(const std::string& name, int64_t cols, int64_t rows, int64_t n_experts, float stddev) {
        const int64_t n = cols * rows * n_experts;
        w_.add_tensor(name, type_, {cols, rows, n_experts}, random_tensor(rng_, n, stddev, type_));
        params_ += n;
    }
    // The router of layer p: F32 whatever the matrices' type (as llama.cpp's converters keep it),
    // scaled up (std 2/sqrt(dim)) so each token's top-k is decided by clear margins.
    void router(const std::string& p, int64_t dim, int64_t n_experts) {
        f32(p + "ffn_gate_inp.weight", {dim, n_experts},
            random_tensor(rng_, dim * n_experts, 2.0f / std::sqrt(float(dim)), GgmlType::F32));
    }
    // Layer p's SwiGLU experts: ffn_gate_exps, ffn_up_exps, ffn_down_exps, f wide.
    void swiglu_experts(const std::string& p, int64_t dim, int64_t f, int64_t n_experts, float out_scale) {
        experts(p + "ffn_gate_exps.weight", dim, f, n_experts, 1.0f / std::sqrt(float(dim)));
        experts(p + "ffn_up_exps.weight", dim, f, n_experts, 1.0f / std::sqrt(float(dim)));
        experts(p + "ffn_down_exps.weight", f, dim, n_experts, out_scale / std::sqrt(float(f)));
    }
    // A SwiGLU FFN of layer p, f wide: ffn_gate, ffn_up, ffn_down with `suffix` ("" the dense FFN,
    // "_shexp" the shared experts).
    void swiglu(const std::string& p, const std::string& suffix, int64_t dim, int64_t f, float out_scale) {
        matrix(p + "ffn_gate" + suffix + ".weight", dim, f, 1.0f / std::sqrt(float(dim)));
        matrix(p + "ffn_up" + suffix + ".weight", dim, f, 1.0f / std::sqrt(float(dim)));
        matrix(p + "ffn_down" + suffix + ".weight", f, dim, out_scale / std::sqrt(float(f)));
    }
    // A NextN block's own tensors (llama.cpp loads them for its multi-token prediction; pagoda skips them).
    void nextn(const std::string& p, int64_t dim) {
        matrix(p + "nextn.eh_proj.weight", 2 * dim, dim, 1.0f / std::sqrt(float(2 * dim)));
        norm(p + "nextn.enorm.weight", dim);
        norm(p + "nextn.hnorm.weight", dim);
        norm(p + "nextn.shared_head_norm.weight", dim);
    }
    void count(int64_t n) { params_ += n; }  // a tensor the generator added itself
    int64_t params() const { return params_; }

private:
    gguf::Writer& w_;
    Rng& rng_;
    GgmlType type_;
    int64_t params_ = 0;
};

}  // namespace pagoda::model::random_detail
