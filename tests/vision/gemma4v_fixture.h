// A small random gemma4v projector for the Gemma 4 vision tests (gemma4v_vision_test.cpp,
// gemma4v_tower_host_test.cpp): written in memory by gen-model's writer, optionally edited (keys,
// tensors dropped or reshaped, tensors added) to make corrupt files, and noise images.
#pragma once
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "vision/image.h"
#include "vision/random_mmproj.h"

namespace pagoda::test {

// Patch 4, pool 3, 16 soft tokens, width 32 in 2 heads of 16, 32 positions a side, standardised.
inline vision::RandomMmprojSpec gemma4v_spec() {
    vision::RandomMmprojSpec s;
    s.projector = "gemma4v";
    s.patch_size = 4;
    s.pool = 3;
    s.n_embd = 32;
    s.n_ff = 48;
    s.n_layers = 2;
    s.n_heads = 2;
    s.text_dim = 24;
    s.max_soft_tokens = 16;
    s.pos_size = 32;
    s.standardize = true;
    return s;
}

// The edited copy borrows the original's tensor bytes, so both writers live as long as it.
struct Gemma4vProjector {
    gguf::Writer base_w, w;
    std::unique_ptr<gguf::File> base, file;
};

inline std::unique_ptr<Gemma4vProjector> gemma4v_projector(
    const vision::RandomMmprojSpec& spec,
    const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&)>& keys = {},
    const std::function<bool(gguf::TensorInfo&)>& tensors = {}, const std::function<void(gguf::Writer&)>& extra = {}) {
    auto out = std::make_unique<Gemma4vProjector>();
    vision::build_random_mmproj(spec, out->base_w);
    out->base = out->base_w.view("mmproj.gguf");
    auto metadata = out->base->metadata();
    if (keys) keys(metadata);
    for (const auto& [k, v] : metadata) out->w.set(k, v);
    for (gguf::TensorInfo t : out->base->tensors()) {
        if (tensors && !tensors(t)) continue;
        out->w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    }
    if (extra) extra(out->w);
    out->file = out->w.view("mmproj.gguf");
    return out;
}

inline vision::Image gemma4v_noise_image(int64_t w, int64_t h, uint32_t seed) {
    std::mt19937 rng(seed);
    vision::Image im{.width = w, .height = h, .rgb = std::vector<uint8_t>(size_t(w * h * 3))};
    for (auto& v : im.rgb) v = uint8_t(rng() % 256);
    return im;
}

}  // namespace pagoda::test
