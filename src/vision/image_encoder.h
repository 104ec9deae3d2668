// An mmproj file ready to turn image files into a text model's input: it opens the projector
// (mmproj.h) and runs its vision tower on a backend of its own — Gemma 3's SigLIP (vision_tower.h,
// fixed tokens per image) or Qwen3-VL's (qwen3vl_tower.h, tokens per image by the image's size), by
// the projector type, behind one interface (image_tower.h) — and for each image decodes the bytes
// (image.h), preprocesses them as that model's processor does and encodes them into token rows. The
// content hash is of the decoded pixels, so the same picture in another encoding hashes alike (the
// prefix cache keys image rows by it). Errors name the image (`what`) or the file. encode() is
// prepare() (decode, hash, preprocess: const, safe from several threads at once) then run_tower()
// (not thread-safe), so a caller with an EncodedImageCache can skip the tower on a known picture.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace pagoda::gguf {
class File;
}
namespace pagoda::backend {
class Backend;
}

namespace pagoda::vision {

class ImageTower;

// An image decoded and preprocessed for the tower: its patches, its content hash and its grid of
// tokens (grid_h x grid_w, row-major; Gemma 3: the pooled grid, the same for every image; Qwen3-VL:
// the merged patch grid, by the image's size).
struct PreparedImage {
    Patches patches;
    uint64_t hash = 0;  // of the decoded RGB pixels and their size
    int64_t grid_h = 0, grid_w = 0;
    int64_t tokens() const { return grid_h * grid_w; }
};

struct EncodedImage {
    std::vector<float> embeddings;  // tokens() x config().token_width(), row-major
    uint64_t hash = 0;              // of the decoded RGB pixels and their size
    int64_t grid_h = 0, grid_w = 0;  // as PreparedImage's
    int64_t tokens() const { return grid_h * grid_w; }
};

class ImageEncoder {
public:
    // backend: a make_backend name (cpu, reference, vulkan: commands pass the model's); threads 0: the
    // backend's default.
    ImageEncoder(const std::string& mmproj_path, const std::string& backend, int threads);
    ~ImageEncoder();
    const VisionConfig& config() const;
    // Gemma 3: its fixed token count per image. Qwen3-VL's and Gemma 4's vary with the image: 0 (see
    // tokens()).
    int64_t tokens_per_image() const { return config().fixed_grid() ? config().n_image_tokens() : 0; }
    EncodedImage encode(std::span<const uint8_t> bytes, std::string_view what);
    // The two halves of encode(): prepare() is const and thread-safe; run_tower() is neither.
    PreparedImage prepare(std::span<const uint8_t> bytes, std::string_view what) const;
    std::vector<float> run_tower(const PreparedImage& image);
    // How many times the tower ran (what a cache saves).
    uint64_t tower_runs() const { return tower_runs_; }
    // This projector's identity for cache keys: a hash of the file's path, size and metadata, so
    // two projectors' embeddings never share a key.
    uint64_t projector_id() const { return projector_id_; }
    EncodedImage encode_file(const std::string& path);

private:
    std::unique_ptr<gguf::File> file_;
    std::unique_ptr<backend::Backend> backend_;
    std::unique_ptr<ImageTower> tower_;  // the projector family's (image_tower.h)
    uint64_t tower_runs_ = 0;
    uint64_t projector_id_ = 0;
};

// Gemma 3's layout of an image in the prompt, as its processor expands the image token:
// "\n\n" <start_of_image>, n x <image_soft_token>, <end_of_image> "\n\n". The ids come from the
// text model's vocabulary (the caller tokenizes; vision knows no tokenizer).
struct Gemma3ImageTokens {
    std::vector<int32_t> double_newline;  // "\n\n" as the vocabulary encodes it
    int32_t start = -1, end = -1, soft = -1;
};
// Appends one image's tokens to `prompt` and returns the position of its first soft token.
int64_t append_gemma3_image(std::vector<int32_t>& prompt, const Gemma3ImageTokens& ids, int64_t n_soft);
// Gemma 4's layout (Gemma4Processor: boi, n x image token, eoi, no newlines): <|image>, n x <|image|>,
// <image|>; the ids in a Gemma3ImageTokens whose double_newline is empty (start, end, soft).
int64_t append_gemma4_image(std::vector<int32_t>& prompt, const Gemma3ImageTokens& ids, int64_t n_soft);

}  // namespace pagoda::vision
