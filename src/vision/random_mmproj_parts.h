// What gen-model's mmproj writers share (random_mmproj.cpp: gemma3; random_mmproj_qwen3vl.cpp:
// qwen3vl_merger; random_mmproj_gemma4v.cpp: gemma4v): the clip.* keys every projector has, in the order llama.cpp's converter writes
// them, and the tensor writers that draw from one generator in call order and count the parameters.
// Only those files include this.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "model/random_tensors.h"
#include "vision/random_mmproj.h"

namespace pagoda::vision::mmproj_detail {

// general.*, then clip.* up to the vision tower's LayerNorm epsilon; `image_size` is the side the
// position table covers.
inline void write_clip_header(const RandomMmprojSpec& s, const std::string& projector, int64_t image_size,
                              gguf::Writer& w) {
    using gguf::Value;
    w.set("general.architecture", Value::string("clip"));
    w.set("general.name", Value::string("random-mmproj"));
    w.set("general.file_type",
          Value::u32(s.type == gguf::GgmlType::F32 ? 0 : s.type == gguf::GgmlType::F16 ? 1 : 32));
    w.set("clip.has_vision_encoder", Value::boolean(true));
    w.set("clip.has_text_encoder", Value::boolean(false));
    w.set("clip.projector_type", Value::string(projector));
    w.set("clip.use_gelu", Value::boolean(true));
    w.set("clip.vision.image_size", Value::u32(uint32_t(image_size)));
    w.set("clip.vision.patch_size", Value::u32(uint32_t(s.patch_size)));
    w.set("clip.vision.embedding_length", Value::u32(uint32_t(s.n_embd)));
    w.set("clip.vision.feed_forward_length", Value::u32(uint32_t(s.n_ff)));
    w.set("clip.vision.block_count", Value::u32(uint32_t(s.n_layers)));
    w.set("clip.vision.projection_dim", Value::u32(uint32_t(s.text_dim)));
    w.set("clip.vision.attention.head_count", Value::u32(uint32_t(s.n_heads)));
    w.set("clip.vision.attention.layer_norm_epsilon", Value::f32(1e-6f));
}

// Pixels normalised from [0, 1] to [-1, 1], as both towers' preprocessors do.
inline void write_image_normalisation(gguf::Writer& w) {
    w.set("clip.vision.image_mean", gguf::Value::f32s({0.5f, 0.5f, 0.5f}));
    w.set("clip.vision.image_std", gguf::Value::f32s({0.5f, 0.5f, 0.5f}));
}

class MmprojAdder {
public:
    MmprojAdder(gguf::Writer& w, uint64_t seed) : w_(w), rng_(seed) {}
    // Uniform values of spread `stddev` in `type`.
    void tensor(const std::string& name, std::vector<int64_t> shape, float stddev, gguf::GgmlType type) {
        int64_t n = 1;
        for (int64_t v : shape) n *= v;
        w_.add_tensor(name, type, std::move(shape), model::random_detail::random_tensor(rng_, n, stddev, type));
        params_ += n;
    }
    // F32 weights around 1 (a norm's scale).
    void around_one(const std::string& name, int64_t n) {
        std::vector<uint8_t> bytes = model::random_detail::random_tensor(rng_, n, 0.2f, gguf::GgmlType::F32);
        for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(bytes.data())[i] += 1.0f;
        w_.add_tensor(name, gguf::GgmlType::F32, {n}, std::move(bytes));
        params_ += n;
    }
    // A LayerNorm of width n: NAME.weight around 1, NAME.bias around 0.
    void layer_norm(const std::string& name, int64_t n) {
        around_one(name + ".weight", n);
        tensor(name + ".bias", {n}, 0.1f, gguf::GgmlType::F32);
    }
    // A tower layer's second half, after its attention: ln2, then ffn_up and ffn_down with biases.
    void tower_ffn(const std::string& b, const RandomMmprojSpec& s) {
        const int64_t d = s.n_embd;
        layer_norm(b + "ln2", d);
        tensor(b + "ffn_up.weight", {d, s.n_ff}, 1.0f / std::sqrt(float(d)), s.type);
        tensor(b + "ffn_up.bias", {s.n_ff}, 0.1f, gguf::GgmlType::F32);
        tensor(b + "ffn_down.weight", {s.n_ff, d}, 1.0f / std::sqrt(float(s.n_ff)), s.type);
        tensor(b + "ffn_down.bias", {d}, 0.1f, gguf::GgmlType::F32);
    }
    int64_t params() const { return params_; }

private:
    gguf::Writer& w_;
    model::random_detail::Rng rng_;
    int64_t params_ = 0;
};

}  // namespace pagoda::vision::mmproj_detail
