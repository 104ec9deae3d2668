// Random-weight vision projectors (`pagoda gen-model --mmproj FILE`) in llama.cpp's mmproj layout
// (mmproj.h), for tests and benchmarks: a small SigLIP tower and Gemma 3's projector, or a small
// Qwen3-VL tower with its mergers ("qwen3vl_merger": random_mmproj_qwen3vl.cpp), or a small Gemma 4
// tower with its pooler and embedder ("gemma4v": random_mmproj_gemma4v.cpp), whose output width
// matches the text model written beside it. Weights are scaled like gen-model's text models
// (std 1/sqrt(fan-in); LayerNorm weights around 1, biases around 0) so activations stay finite.
#pragma once
#include <cstdint>
#include <string>

#include "gguf/ggml_types.h"

namespace pagoda::gguf {
class Writer;
}

namespace pagoda::vision {

struct RandomMmprojSpec {
    std::string projector = "gemma3";
    int64_t image_size = 64, patch_size = 8;  // 8 x 8 patches
    int64_t pool = 2;                         // -> 4 x 4 = 16 image tokens
    int64_t n_embd = 32, n_ff = 64, n_layers = 2, n_heads = 4;
    int64_t text_dim = 64;  // the text model's embedding width
    gguf::GgmlType type = gguf::GgmlType::F32;
    uint64_t seed = 7;
    // qwen3vl_merger: merge x merge patches a token, a pos_grid x pos_grid position table, images of
    // min_pixels..max_pixels, the first n_deepstack layers feeding deep-stack mergers (the text
    // model's n_deepstack_layers).
    int64_t merge = 2, pos_grid = 6, min_pixels = 1024, max_pixels = 4096, n_deepstack = 1;
    // gemma4v: images resized within max_soft_tokens x pool^2 patches, pos_size learned positions per
    // axis, v.std_bias / v.std_scale written when standardize.
    int64_t max_soft_tokens = 16, pos_size = 64;
    bool standardize = false;
};

// Metadata and tensors into `w`; returns the parameter count.
int64_t build_random_mmproj(const RandomMmprojSpec& spec, gguf::Writer& w);
// The qwen3vl_merger form (random_mmproj_qwen3vl.cpp).
int64_t build_random_qwen3vl_mmproj(const RandomMmprojSpec& spec, gguf::Writer& w);
// The gemma4v form (random_mmproj_gemma4v.cpp).
int64_t build_random_gemma4v_mmproj(const RandomMmprojSpec& spec, gguf::Writer& w);
int64_t write_random_mmproj(const RandomMmprojSpec& spec, const std::string& path);

}  // namespace pagoda::vision
