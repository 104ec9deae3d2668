// One interface over the projector families' vision towers, so ImageEncoder holds one tower whatever
// the projector: Gemma 3's SigLIP (vision_tower.h: a fixed square image, a fixed token grid) and
// Qwen3-VL's (qwen3vl_tower.h: Qwen's smart resize, the merged grid by the image's size) and Gemma 4's
// (gemma4v_tower.h: an aspect-preserving resize within a soft-token budget, the pooled grid).
// open_image_tower() reads the projector's config once and hands it to the tower it picks by
// clip.projector_type. A tower runs its own steps on a backend of its own; not thread-safe
// (preprocess() is const and is).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "vision/image.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace pagoda::vision {

// An image as a tower takes it: its patches and its grid of output tokens (grid_h x grid_w,
// row-major: encode() returns that many rows).
struct TowerInput {
    Patches patches;
    int64_t grid_h = 0, grid_w = 0;
};

class ImageTower {
public:
    virtual ~ImageTower() = default;
    virtual const VisionConfig& config() const = 0;
    // The image preprocessed as the model's processor does (preprocess.h, qwen3vl_preprocess.h).
    virtual TowerInput preprocess(const Image& image) const = 0;
    // grid_h x grid_w rows of config().token_width() floats, row-major.
    virtual std::vector<float> encode(const Patches& patches) = 0;
};

// The file must outlive the tower. Throws pagoda::Error naming the file for a projector type
// neither tower reads (read_vision_config) or a backend that lacks a tower op.
std::unique_ptr<ImageTower> open_image_tower(const gguf::File& file, backend::Backend& backend);

}  // namespace pagoda::vision
