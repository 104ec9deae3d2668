#include "server/image_input.h"

#include <fmt/format.h>

#include "core/error.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"
#include "vision/data_url.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

int32_t control_token(const tokenizer::Tokenizer& t, const std::string& text) {
    const auto ids = t.encode(text, {.add_bos = false, .add_eos = false, .parse_special = true});
    if (ids.size() != 1 || t.token_to_piece(ids[0], true) != text)
        fail("the model's vocabulary has no {} token, which Gemma 3's image prompts need", text);
    return ids[0];
}

// A data: URL is what an API sends an image as; anything larger than this is refused unread.
constexpr uint64_t kMaxImageBytes = uint64_t(20) << 20;

}  // namespace

ImageInput::ImageInput(const std::string& mmproj_path, const std::string& backend, int threads,
                       const tokenizer::Tokenizer& tokenizer, int64_t text_dim, uint64_t cache_bytes)
    : encoder_(std::make_unique<vision::ImageEncoder>(mmproj_path, backend, threads)) {
    // Its variable-size images and M-RoPE grid do not travel through the engine's requests yet.
    if (encoder_->config().qwen3vl())
        fail("{}: Qwen3-VL images are read by `pagoda run --image` only; chat and serve take Gemma 3's projector",
             mmproj_path);
    if (cache_bytes > 0) cache_ = std::make_unique<vision::EncodedImageCache>(cache_bytes);
    if (encoder_->config().text_dim != text_dim)
        fail("{}: the projector's output width {} is not the text model's {}", mmproj_path, encoder_->config().text_dim,
             text_dim);
    ids_.double_newline = tokenizer.encode("\n\n", {.add_bos = false, .add_eos = false});
    ids_.start = control_token(tokenizer, kImageMarker);
    ids_.end = control_token(tokenizer, "<end_of_image>");
    ids_.soft = control_token(tokenizer, "<image_soft_token>");
    tokens_per_image_ = encoder_->tokens_per_image();
}

ImageInput::~ImageInput() = default;

vision::EncodedImage ImageInput::encode(const std::string& url, const std::string& where) {
    try {
        vision::DataUrl data = vision::parse_data_url(url, kMaxImageBytes, where);
        const std::string& type = data.media_type;
        if (!type.empty() && type != "image/png" && type != "image/jpeg" && type != "image/jpg" && type != "image/webp")
            throw ApiError::invalid(fmt::format("'{}' is an unsupported image type '{}': PNG, JPEG and WebP are read",
                                                where, type),
                                    where, "invalid_image");
        return encode_checked(data.bytes, where);
    } catch (const ApiError&) {
        throw;
    } catch (const std::exception& e) {
        throw ApiError::invalid(fmt::format("'{}' is not a readable image: {}", where, e.what()), where, "invalid_image");
    }
}

vision::EncodedImage ImageInput::encode_base64(const std::string& base64, const std::string& where) {
    try {
        if (base64.size() / 4 * 3 > kMaxImageBytes)
            throw ApiError::invalid(fmt::format("'{}' is over the limit of {} bytes for an image", where, kMaxImageBytes),
                                    where, "invalid_image");
        return encode_checked(vision::decode_base64(base64, where), where);
    } catch (const ApiError&) {
        throw;
    } catch (const std::exception& e) {
        throw ApiError::invalid(fmt::format("'{}' is not a readable image: {}", where, e.what()), where, "invalid_image");
    }
}

vision::EncodedImage ImageInput::encode_bytes(std::span<const uint8_t> bytes, const std::string& where) {
    try {
        return encode_checked(bytes, where);
    } catch (const std::exception& e) {
        throw ApiError::invalid(fmt::format("'{}' is not a readable image: {}", where, e.what()), where, "invalid_image");
    }
}

vision::EncodedImage ImageInput::encode_checked(std::span<const uint8_t> bytes, const std::string& where) {
    // Decoding, resizing and hashing need no lock: only the tower is one at a time.
    vision::PreparedImage prepared = encoder_->prepare(bytes, where);
    const vision::ImageCacheKey key{.projector = encoder_->projector_id(), .pixels = prepared.hash};
    if (cache_)
        if (auto hit = cache_->find(key)) return {.embeddings = std::move(*hit), .hash = prepared.hash};
    vision::EncodedImage out;
    out.hash = prepared.hash;
    {
        std::lock_guard lock(mutex_);
        out.embeddings = encoder_->run_tower(prepared);
    }
    if (cache_) cache_->insert(key, out.embeddings);
    return out;
}

uint64_t ImageInput::tower_runs() const {
    std::lock_guard lock(mutex_);
    return encoder_->tower_runs();
}

std::optional<vision::ImageCacheStats> ImageInput::cache_stats() const {
    if (!cache_) return std::nullopt;
    return cache_->stats();
}

std::vector<engine::PromptImage> ImageInput::expand(std::vector<int32_t>& prompt,
                                                    std::vector<vision::EncodedImage> images,
                                                    const std::string& param) const {
    size_t markers = 0;
    for (int32_t id : prompt) markers += id == ids_.start ? 1 : 0;
    if (markers != images.size())
        throw ApiError::invalid(fmt::format("the rendered prompt holds {} image markers ({}) for {} images: the chat "
                                            "template renders no image where a part was, or a message's text spells "
                                            "the marker",
                                            markers, kImageMarker, images.size()),
                                param, "invalid_image");
    std::vector<int32_t> out;
    std::vector<engine::PromptImage> spans;
    out.reserve(prompt.size() + images.size() * size_t(tokens_per_image_ + 8));
    for (int32_t id : prompt) {
        if (id != ids_.start) {
            out.push_back(id);
            continue;
        }
        vision::EncodedImage& image = images[spans.size()];
        const int64_t begin = vision::append_gemma3_image(out, ids_, tokens_per_image_);
        spans.push_back({.begin = begin, .rows = tokens_per_image_, .embeddings = std::move(image.embeddings),
                         .hash = image.hash});
    }
    prompt = std::move(out);
    return spans;
}

}  // namespace pagoda::server
