// Images in chat requests (`serve --mmproj`, `chat --mmproj`). The chat parsers accept image parts
// (Chat Completions image_url, Responses input_image, Anthropic image blocks: all become image_url
// parts with a data: URL); the chat template renders the model's image marker where each part was
// (marker(): Gemma 3's <start_of_image>; Gemma 4's <|image|>; Qwen3-VL's
// <|vision_start|><|image_pad|><|vision_end|>); after tokenising, each marker is expanded into the
// model's layout with the image's tokens (Gemma 3: "\n\n" <start_of_image>, its fixed soft tokens,
// <end_of_image> "\n\n"; Gemma 4: <|image>, one <|image|> per pooled token of the image, <image|>;
// Qwen3-VL: the one <|image_pad|> becomes one pad per merged token of the image's grid) and the image's embeddings
// (and Qwen3-VL's grid, for M-RoPE) ride along as engine::PromptImage.
// ImageInput owns the projector (vision::ImageEncoder, which is not thread-safe: a mutex of its own
// serialises the tower, never the engine's lock); encode() runs on the request's thread, decoding
// and hashing outside that lock. With an encoded-image cache (serve --image-cache-mb) a picture
// seen before (same pixels and size, same projector) skips the tower. Every problem is an ApiError
// 400 naming the part ("messages[1].content[0]").
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "model/step_model.h"
#include "server/image_parts.h"
#include "vision/encoded_image_cache.h"
#include "vision/image_encoder.h"
#include "vision/qwen3vl_layout.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::server {

class ImageInput {
public:
    // Opens the projector on `backend` (a make_backend name: the model's) and checks it against the
    // text model: the same widths (text_dim, and the deep-stack slices of an image row), M-RoPE
    // exactly for Qwen3-VL's projector, and the projector's image tokens in its vocabulary. Throws
    // pagoda::Error naming the file or the missing token. `cache_bytes`: the encoded-image cache's bound (0: none).
    ImageInput(const std::string& mmproj_path, const std::string& backend, int threads,
               const tokenizer::Tokenizer& tokenizer, const model::StepModelInfo& text_model, uint64_t cache_bytes = 0);
    ~ImageInput();
    // Gemma 3's fixed tokens per image; 0 for Qwen3-VL and Gemma 4, whose counts follow each image's size.
    int64_t tokens_per_image() const { return tokens_per_image_; }
    bool qwen3vl() const { return qwen3vl_; }
    // The text the chat template (or a joined text, or a /v1/completions media marker) writes for
    // one image, which expand() replaces.
    const std::string& marker() const { return marker_; }
    // A data: URL's image -> its token embeddings, grid and content hash; ApiError 400 naming `where`
    // for an unsupported type, a corrupt image, or (max_tokens > 0) an image of more tokens than
    // max_tokens, the image tokens one engine step takes. Serialised (one tower run at a time).
    vision::EncodedImage encode(const std::string& url, const std::string& where, int64_t max_tokens = 0);
    // The same for base64 text (a /v1/completions prompt object's multimodal_data item).
    vision::EncodedImage encode_base64(const std::string& base64, const std::string& where, int64_t max_tokens = 0);
    // The same for an image file's bytes (PNG, JPEG or WebP by their magic number).
    vision::EncodedImage encode_bytes(std::span<const uint8_t> bytes, const std::string& where, int64_t max_tokens = 0);
    // How many times the tower ran (a cache hit does not run it).
    uint64_t tower_runs() const;
    // The cache's counters; nullopt without a cache.
    std::optional<vision::ImageCacheStats> cache_stats() const;
    // Replaces the i-th image marker in `prompt` by images[i] in the model's layout (Gemma 3: "\n\n"
    // <start_of_image>, its soft tokens, <end_of_image> "\n\n"; Qwen3-VL: the marker's <|image_pad|>
    // repeated once per merged token, the grid on the span) and returns the images' spans.
    // ApiError 400 naming `param` when the prompt holds another number of markers than images (a
    // template that renders no images, or message text that spells the marker).
    std::vector<engine::PromptImage> expand(std::vector<int32_t>& prompt, std::vector<vision::EncodedImage> images,
                                            const std::string& param = "messages") const;

private:
    vision::EncodedImage encode_checked(std::span<const uint8_t> bytes, const std::string& where, int64_t max_tokens);

    mutable std::mutex mutex_;  // the tower's
    std::unique_ptr<vision::ImageEncoder> encoder_;
    bool qwen3vl_ = false, gemma4v_ = false;
    std::string marker_;
    vision::Gemma3ImageTokens ids_;        // Gemma 3's and Gemma 4's (no newlines)
    vision::Qwen3VlImageTokens qwen_ids_;  // Qwen3-VL's
    int64_t tokens_per_image_ = 0;
    std::unique_ptr<vision::EncodedImageCache> cache_;  // null: off
};

}  // namespace pagoda::server
