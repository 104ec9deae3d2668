// Images in chat requests (`serve --mmproj`). The chat parsers accept image parts (Chat
// Completions image_url, Responses input_image, Anthropic image blocks: all become image_url parts
// with a data: URL); the chat template renders an image marker where each part was (Gemma 3's
// <start_of_image>); after tokenising, each marker is expanded into Gemma 3's layout with the
// image's soft tokens and the image's embeddings ride along as engine::PromptImage.
// ImageInput owns the projector (vision::ImageEncoder, which is not thread-safe: a mutex of its own
// serialises the tower, never the engine's lock); encode() runs on the request's thread, decoding
// and hashing outside that lock. With an encoded-image cache (serve --image-cache-mb) a picture
// seen before (same pixels, same projector) skips the tower. Every problem is an ApiError 400
// naming the part ("messages[1].content[0]").
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
#include "server/image_parts.h"
#include "vision/encoded_image_cache.h"
#include "vision/image_encoder.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::server {

class ImageInput {
public:
    // Opens the projector on `backend` ("cpu" or "reference") and checks it against the text model:
    // the same width (`text_dim`) and Gemma 3's image tokens in its vocabulary. Throws pagoda::Error
    // naming the file or the missing token. `cache_bytes`: the encoded-image cache's bound (0: none).
    ImageInput(const std::string& mmproj_path, const std::string& backend, int threads,
               const tokenizer::Tokenizer& tokenizer, int64_t text_dim, uint64_t cache_bytes = 0);
    ~ImageInput();
    int64_t tokens_per_image() const { return tokens_per_image_; }
    // A data: URL's image -> its soft-token embeddings and content hash; ApiError 400 naming `where`
    // for an unsupported type or a corrupt image. Serialised (one encode at a time).
    vision::EncodedImage encode(const std::string& url, const std::string& where);
    // The same for base64 text (a /v1/completions prompt object's multimodal_data item).
    vision::EncodedImage encode_base64(const std::string& base64, const std::string& where);
    // The same for an image file's bytes (PNG, JPEG or WebP by their magic number).
    vision::EncodedImage encode_bytes(std::span<const uint8_t> bytes, const std::string& where);
    // How many times the tower ran (a cache hit does not run it).
    uint64_t tower_runs() const;
    // The cache's counters; nullopt without a cache.
    std::optional<vision::ImageCacheStats> cache_stats() const;
    // Replaces the i-th image marker in `prompt` by images[i] in Gemma 3's layout ("\n\n"
    // <start_of_image>, its soft tokens, <end_of_image> "\n\n") and returns the images' spans.
    // ApiError 400 naming `param` when the prompt holds another number of markers than images (a
    // template that renders no images, or message text that spells the marker).
    std::vector<engine::PromptImage> expand(std::vector<int32_t>& prompt, std::vector<vision::EncodedImage> images,
                                            const std::string& param = "messages") const;

private:
    vision::EncodedImage encode_checked(std::span<const uint8_t> bytes, const std::string& where);

    mutable std::mutex mutex_;  // the tower's
    std::unique_ptr<vision::ImageEncoder> encoder_;
    vision::Gemma3ImageTokens ids_;
    int64_t tokens_per_image_ = 0;
    std::unique_ptr<vision::EncodedImageCache> cache_;  // null: off
};

}  // namespace pagoda::server
