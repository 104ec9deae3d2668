// Qwen3-VL's vision tower and its mergers (the "qwen3vl_merger" mmproj, mmproj.h) on a compute
// backend: an image's merge-ordered patches (qwen3vl_preprocess.h) in, one row per image token out,
// as transformers' Qwen3VLVisionModel computes it. With d the width, gh x gw the patch grid:
//   x = patches (W0 + W1)^T + b      (v.patch_embd.weight and .weight.1: the conv3d's two temporal
//                                     kernels, both over the same picture; .bias)
//   x += pos(gh, gw)                  (v.position_embd: a G x G table bilinearly interpolated to the
//                                     grid as fast_pos_embed_interpolate does, corners at linspace(0,
//                                     G - 1, n), in merge order)
//   per layer l (pre-LayerNorm blocks, eps from the file):
//     h = LN1(x); q|k|v = h Wqkv^T + b (v.blk.l.attn_qkv); 2D RoPE on q and k (NEOX halves over the
//     head; pair i < head/4 turns by the patch's row, the next head/4 pairs by its column, each at
//     theta^(-4 (i mod head/4) / head)); x += attention(q, k, v) Wo^T + bo    (not causal)
//     h = LN2(x); x += gelu_tanh(h Wup^T + bup) Wdown^T + bdown
//     at a deep-stack layer: ds_l = merger(x) with v.deepstack.l.{norm, fc1, fc2}, the norm over the
//     merge^2 d values of a token (after the shuffle)
//   main = merger(x) with v.post_ln (a LayerNorm per patch, before the shuffle), mm.0 and mm.2
//   merger: y = rows of merge^2 consecutive patches (4d); y = gelu_erf(y fc1^T + b1) fc2^T + b2
// Contract: encode() returns (gh / merge)(gw / merge) rows of token_width() = text_dim (1 + deep-
// stack count) floats: [main, ds_first, ..., ds_last], the layout llama.cpp's qwen3vl text model
// reads (model/arch/qwen3vl.cpp). Runs its own steps on a backend of its own; not thread-safe.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "vision/image_tower.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace pagoda::vision {

class Qwen3VlTower : public ImageTower {
public:
    // Validates the file (read_vision_config: a qwen3vl_merger projector) and uploads its weights;
    // the file must outlive the tower.
    Qwen3VlTower(const gguf::File& file, backend::Backend& backend);
    // The same with the file's config already read (open_image_tower).
    Qwen3VlTower(const gguf::File& file, VisionConfig config, backend::Backend& backend);
    ~Qwen3VlTower() override;
    const VisionConfig& config() const override { return config_; }
    // qwen3vl_preprocess with the projector's sizes; the grid is the patch grid over merge.
    TowerInput preprocess(const Image& image) const override;
    std::vector<float> encode(const Patches& patches) override;

    // The learned positions interpolated to a gh x gw patch grid, rows in merge order (host floats,
    // computed in double): exposed for tests.
    std::vector<float> interpolated_positions(int64_t grid_h, int64_t grid_w) const;

private:
    struct Weights;
    void reserve(int64_t n_patches);
    backend::Backend& backend_;
    VisionConfig config_;
    std::unique_ptr<Weights> w_;
};

}  // namespace pagoda::vision
