// Gemma 3's vision tower from an mmproj file (mmproj.h), run on a compute backend: image patches in,
// the image's soft-token embeddings (in the text model's embedding space) out.
//   x = patches W_patch^T + b_patch + position_embd[p]                        (p = patch index)
//   per layer (pre-LayerNorm SigLIP block):
//     h = LN1(x); q, k, v = h W_{q,k,v}^T + b; x += attention(q, k, v) W_out^T + b_out   (not causal)
//     h = LN2(x); x += gelu_tanh(h W_up^T + b_up) W_down^T + b_down
//   x = post_LN(x); average-pool the patch grid by pool x pool (Gemma3MultiModalProjector's AvgPool2d)
//   out = RMSNorm(x) * soft_emb_norm (the file stores Gemma's 1 + w) ; out = out W_proj  (text_dim)
// Everything but the pooling runs as backend ops (matmul, layer_norm, add_bias, add_position_embedding,
// kv_write + non-causal attention over one sequence of the patches, gelu_mul with a ones operand for
// SigLIP's tanh GELU, rms_norm); the pooling is a fixed average over host rows between two steps of
// ops. Contract: encode() returns n_image_tokens x text_dim floats, row-major, token r = pooled cell
// (r / tokens_per_side, r % tokens_per_side). The tower reserves its backend's activation arena and
// runs its own steps, so it needs a backend instance of its own (not the text model's); not
// thread-safe. The KV cache it attends through is f32, one sequence of the image's patches.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "vision/image_tower.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace pagoda::vision {

class VisionTower : public ImageTower {
public:
    // Validates the file (read_vision_config) and uploads its weights; the file must outlive the tower
    // (a backend may keep reading a mapped file's weights in place).
    VisionTower(const gguf::File& file, backend::Backend& backend);
    // The same with the file's config already read (open_image_tower).
    VisionTower(const gguf::File& file, VisionConfig config, backend::Backend& backend);
    ~VisionTower() override;
    const VisionConfig& config() const override { return config_; }
    // siglip_preprocess at the tower's image size; the grid is the pooled tokens_per_side square.
    TowerInput preprocess(const Image& image) const override;
    // patches: siglip_preprocess's rows for this tower's image and patch size.
    std::vector<float> encode(const Patches& patches) override;

private:
    struct Weights;
    backend::Backend& backend_;
    VisionConfig config_;
    std::unique_ptr<Weights> w_;
};

}  // namespace pagoda::vision
