// Gemma 4's vision tower and embedder (the "gemma4v" mmproj, mmproj.h) on a compute backend, as
// transformers' Gemma4VisionModel + Gemma4MultimodalEmbedder compute it and llama.cpp's gemma4v graph
// reads the file. With d the width, hd the head size, gh x gw the patch grid (gemma4v_preprocess.h):
//   x = (2 pixels - 1) W_patch^T                (v.patch_embd.weight; no bias; pixels in [0, 1])
//   x += pos[0][column] + pos[1][row]           (v.position_embd.weight [d, P, 2]: two learned tables)
//   per layer (RMSNorm sandwich, weights as stored, eps from the file):
//     h = rms(x) ln1; q, k, v = h W_{q,k,v}^T
//     q = rms_head(q) q_norm; k = rms_head(k) k_norm; v = rms_head(v)   (per head of hd, v unweighted)
//     2D RoPE on q and k, base 100: the first half of each head turns by the patch's column, the second
//     by its row, each half NEOX-paired within itself (pair i with i + hd/4, angle pos theta^(-4i/hd))
//     x += rms(attention(q, k, v) W_out^T) attn_post_norm        (not causal, scale 1)
//     h = rms(x) ln2; x += rms((gelu_tanh(h W_gate^T) * h W_up^T) W_down^T) ffn_post_norm
//   pooled = average of each pool x pool window of the grid, times sqrt(d)   (Gemma4VisionPooler)
//   pooled = (pooled - v.std_bias) v.std_scale   when the file has them
//   out = rms(pooled) W_proj^T                  (mm.input_projection.weight [d, text_dim]; unweighted norm)
// Tensors (ggml order; mmproj_gemma4v.cpp checks them, and refuses any other): v.patch_embd.weight
// [p, p, 3, d]; v.position_embd.weight [d, P, 2]; v.blk.N.{attn_q,attn_k,attn_v,attn_out}.weight [d, d];
// v.blk.N.{attn_q_norm,attn_k_norm}.weight [hd]; v.blk.N.{ln1,ln2,attn_post_norm,ffn_post_norm}.weight
// [d]; v.blk.N.{ffn_gate,ffn_up}.weight [d, ff]; v.blk.N.ffn_down.weight [ff, d];
// mm.input_projection.weight [d, text_dim]; optional v.std_bias, v.std_scale [d] and clamp scalars [1].
// Keys: clip.vision.projector.scale_factor (pool, default 3), clip.vision.image_max_tokens (the
// soft-token budget, default 280), image_mean / image_std (default 0 / 1); RoPE base 100 (fixed).
// A matrix with Gemma4ClippableLinear bounds (NAME.input_min/max, NAME.output_min/max scalars) clamps
// its input and output to them (on the host, between backend ops).
// The RoPE's pairing is put into the backend's whole-head NEOX form (pair j with j + hd/2) by
// swapping the second and third quarter of every q and k head in W_q, W_k, q_norm and k_norm at load:
// q.k is unchanged by a permutation applied to both, and the RMS norms do not see the order.
// Contract: encode() returns (gh / pool)(gw / pool) rows of text_dim floats, token r = pooled cell
// (r / (gw / pool), r % (gw / pool)). Runs its own steps on a backend of its own; not thread-safe.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "vision/image_tower.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace pagoda::vision {

class Gemma4vTower : public ImageTower {
public:
    // Validates the file (read_vision_config: a gemma4v projector) and uploads its weights; the file
    // must outlive the tower.
    Gemma4vTower(const gguf::File& file, backend::Backend& backend);
    Gemma4vTower(const gguf::File& file, VisionConfig config, backend::Backend& backend);
    ~Gemma4vTower() override;
    const VisionConfig& config() const override { return config_; }
    // gemma4v_preprocess with the projector's sizes; the grid is the patch grid over pool.
    TowerInput preprocess(const Image& image) const override;
    std::vector<float> encode(const Patches& patches) override;

private:
    struct Weights;
    void reserve(int64_t n_patches);
    backend::Backend& backend_;
    VisionConfig config_;
    std::unique_ptr<Weights> w_;
};

}  // namespace pagoda::vision
