// The vision projector file (`--mmproj FILE`) in llama.cpp's mmproj GGUF layout (tools/mtmd/clip):
// general.architecture "clip", clip.has_vision_encoder true, clip.projector_type (or
// clip.vision.projector_type), the tower's sizes under clip.vision.*, and tensors named v.* (the
// ViT) and mm.* (the projector). Gemma 3's projector ("gemma3": SigLIP, average pooling,
// soft_emb_norm, input_projection), Qwen3-VL's ("qwen3vl_merger": mmproj_qwen3vl.cpp, whose
// tensors vision/qwen3vl_tower.h lists) and Gemma 4's ("gemma4v": mmproj_gemma4v.cpp, tensors in
// vision/gemma4v_tower.h) are read; every other projector type is refused by name.
// Contract: read_vision_config validates every key and every tensor's presence, type and shape
// before anything is uploaded, and throws pagoda::Error naming the file and the key or tensor.
//   v.patch_embd.weight [p, p, 3, n_embd] (+ .bias [n_embd]); v.position_embd.weight [n_embd, n_patches]
//   v.blk.N.{attn_q,attn_k,attn_v,attn_out}.{weight [n_embd, n_embd], bias [n_embd]}
//   v.blk.N.{ln1,ln2}.{weight,bias} [n_embd]; v.blk.N.ffn_up.weight [n_embd, n_ff] (+ bias [n_ff]);
//   v.blk.N.ffn_down.weight [n_ff, n_embd] (+ bias); v.post_ln.{weight,bias} [n_embd]
//   mm.soft_emb_norm.weight [n_embd] (llama.cpp's converter stores Gemma's 1 + w);
//   mm.input_projection.weight [text_dim, n_embd] (ggml order: transformers' [n_embd][text_dim], x W)
// Files from older converters name SigLIP's fc1/fc2 ffn_down/ffn_up; their shapes give it away, and
// the FFN tensor names are swapped back (as llama.cpp does).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "vision/preprocess.h"

namespace pagoda::vision {

struct VisionConfig {
    std::string projector;  // "gemma3", "qwen3vl_merger" or "gemma4v"
    int64_t image_size = 0, patch_size = 0;
    int64_t n_embd = 0, n_ff = 0, n_layers = 0, n_heads = 0;
    int64_t text_dim = 0;  // the projection's output: the text model's embedding width
    int64_t pool = 0;      // Gemma 3 and 4: average-pooling kernel and stride, in patches (4 at 896 / 14; 3)
    float eps = 1e-6f;     // LayerNorms and soft_emb_norm
    ImageNormalization norm;
    std::string ffn_up = "ffn_up", ffn_down = "ffn_down";  // tensor names (legacy files swap them)
    // qwen3vl_merger: images of any size (image_size is only the file's nominal one), resized to
    // multiples of patch x merge with min_pixels..max_pixels pixels; merge x merge patches make one
    // token; the learned positions are a pos_grid x pos_grid table interpolated to the image's grid;
    // the layers whose output feeds a deep-stack merger, increasing.
    int64_t merge = 0, pos_grid = 0, min_pixels = 0, max_pixels = 0;
    float rope_theta = 10000.0f;
    std::vector<int32_t> deepstack_layers;
    // gemma4v: images of any size, resized to at most max_soft_tokens x pool^2 patches (sides
    // multiples of patch x pool); the learned positions are two tables of pos_size rows (column,
    // row); v.std_bias / v.std_scale present (standardize).
    int64_t max_soft_tokens = 0, pos_size = 0;
    bool standardize = false;

    bool qwen3vl() const { return projector == "qwen3vl_merger"; }
    bool gemma4v() const { return projector == "gemma4v"; }
    // Gemma 3's fixed square image gives every image the same token count; the others vary.
    bool fixed_grid() const { return projector == "gemma3"; }
    // The values of one image token's row: text_dim, and text_dim per deep-stack merger after it.
    int64_t token_width() const { return text_dim * (1 + int64_t(deepstack_layers.size())); }

    int64_t head_dim() const { return n_embd / n_heads; }
    // Gemma 3's fixed square image; 0 for a projector without one (Qwen3-VL: no image_size or pool).
    int64_t patches_per_side() const { return patch_size > 0 ? image_size / patch_size : 0; }
    int64_t n_patches() const { return patches_per_side() * patches_per_side(); }
    int64_t tokens_per_side() const { return pool > 0 ? patches_per_side() / pool : 0; }
    int64_t n_image_tokens() const { return tokens_per_side() * tokens_per_side(); }  // gemma3: soft tokens per image
};

VisionConfig read_vision_config(const gguf::File& file);
// The qwen3vl_merger part of read_vision_config (mmproj_qwen3vl.cpp): c holds the common sizes.
void read_qwen3vl_config(const gguf::File& file, VisionConfig& c);
// The gemma4v part (mmproj_gemma4v.cpp), likewise.
void read_gemma4v_config(const gguf::File& file, VisionConfig& c);
// Throws naming the file and tensor unless `name` is present with exactly `shape` (the readers' check).
void expect_mmproj_tensor(const gguf::File& file, const std::string& name, std::vector<int64_t> shape);

// A one-line summary for logs and `pagoda info`-style output.
std::string describe(const VisionConfig& c);

}  // namespace pagoda::vision
