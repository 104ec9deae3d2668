#include "server/image_input.h"

#include <fmt/format.h>

#include "core/base64.h"
#include "core/error.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"
#include "vision/data_url.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

int32_t control_token(const tokenizer::Tokenizer& t, const std::string& text, const char* who) {
    const auto ids = t.encode(text, {.add_bos = false, .add_eos = false, .parse_special = true});
    if (ids.size() != 1 || t.token_to_piece(ids[0], true) != text)
        fail("the model's vocabulary has no {} token, which {} image prompts need", text, who);
    return ids[0];
}

// The Qwen3-VL chat template's text for an image part (and what a joined text or a media marker
// becomes): expand() replaces its one <|image_pad|> by the image's pads.
constexpr const char* kQwenImageMarker = "<|vision_start|><|image_pad|><|vision_end|>";

// A data: URL is what an API sends an image as; anything larger than this is refused unread.
constexpr uint64_t kMaxImageBytes = uint64_t(20) << 20;

}  // namespace

ImageInput::ImageInput(const std::string& mmproj_path, const std::string& backend, int threads,
                       const tokenizer::Tokenizer& tokenizer, const model::StepModelInfo& text_model,
                       uint64_t cache_bytes)
    : encoder_(std::make_unique<vision::ImageEncoder>(mmproj_path, backend, threads)) {
    const vision::VisionConfig& vc = encoder_->config();
    const model::ModelConfig& text = text_model.config;
    qwen3vl_ = vc.qwen3vl();
    gemma4v_ = vc.gemma4v();
    if (gemma4v_ != (text.arch == "gemma4"))
        fail("{}: a {} projector is not for this {} model", mmproj_path, vc.projector, text.arch);
    // Qwen3-VL's image rows are placed by their grid (M-RoPE); Gemma 3's by ordinary positions.
    if (qwen3vl_ != text_model.mrope)
        fail("{}: a {} projector is not for this {} model ({})", mmproj_path, vc.projector,
             text_model.mrope ? "M-RoPE" : "single-axis RoPE", text.arch);
    if (cache_bytes > 0) cache_ = std::make_unique<vision::EncodedImageCache>(cache_bytes);
    if (vc.text_dim != text.dim)
        fail("{}: the projector's output width {} is not the text model's {}", mmproj_path, vc.text_dim, text.dim);
    if (vc.token_width() != text.input_embedding_width())
        fail("{}: the projector's {} deep-stack mergers do not feed this model's {}-wide image rows", mmproj_path,
             vc.deepstack_layers.size(), text.input_embedding_width());
    if (qwen3vl_) {
        qwen_ids_.start = control_token(tokenizer, "<|vision_start|>", "Qwen3-VL's");
        qwen_ids_.end = control_token(tokenizer, "<|vision_end|>", "Qwen3-VL's");
        qwen_ids_.pad = control_token(tokenizer, "<|image_pad|>", "Qwen3-VL's");
        marker_ = kQwenImageMarker;
    } else if (gemma4v_) {
        // Gemma 4's template writes its image token once per image; expand() puts the layout there.
        ids_.start = control_token(tokenizer, "<|image>", "Gemma 4's");
        ids_.end = control_token(tokenizer, "<image|>", "Gemma 4's");
        ids_.soft = control_token(tokenizer, "<|image|>", "Gemma 4's");
        marker_ = "<|image|>";
    } else {
        ids_.double_newline = tokenizer.encode("\n\n", {.add_bos = false, .add_eos = false});
        ids_.start = control_token(tokenizer, kImageMarker, "Gemma 3's");
        ids_.end = control_token(tokenizer, "<end_of_image>", "Gemma 3's");
        ids_.soft = control_token(tokenizer, "<image_soft_token>", "Gemma 3's");
        marker_ = kImageMarker;
    }
    tokens_per_image_ = encoder_->tokens_per_image();
}

ImageInput::~ImageInput() = default;

vision::EncodedImage ImageInput::encode(const std::string& url, const std::string& where, int64_t max_tokens) {
    try {
        vision::DataUrl data = vision::parse_data_url(url, kMaxImageBytes, where);
        const std::string& type = data.media_type;
        if (!type.empty() && type != "image/png" && type != "image/jpeg" && type != "image/jpg" && type != "image/webp")
            throw ApiError::invalid(fmt::format("'{}' is an unsupported image type '{}': PNG, JPEG and WebP are read",
                                                where, type),
                                    where, "invalid_image");
        return encode_checked(data.bytes, where, max_tokens);
    } catch (const ApiError&) {
        throw;
    } catch (const std::exception& e) {
        throw ApiError::invalid(fmt::format("'{}' is not a readable image: {}", where, e.what()), where, "invalid_image");
    }
}

vision::EncodedImage ImageInput::encode_base64(const std::string& base64, const std::string& where,
                                               int64_t max_tokens) {
    try {
        if (base64.size() / 4 * 3 > kMaxImageBytes)
            throw ApiError::invalid(fmt::format("'{}' is over the limit of {} bytes for an image", where, kMaxImageBytes),
                                    where, "invalid_image");
        return encode_checked(pagoda::decode_base64(base64, where), where, max_tokens);
    } catch (const ApiError&) {
        throw;
    } catch (const std::exception& e) {
        throw ApiError::invalid(fmt::format("'{}' is not a readable image: {}", where, e.what()), where, "invalid_image");
    }
}

vision::EncodedImage ImageInput::encode_bytes(std::span<const uint8_t> bytes, const std::string& where,
                                              int64_t max_tokens) {
    try {
        return encode_checked(bytes, where, max_tokens);
    } catch (const ApiError&) {
        throw;
    } catch (const std::exception& e) {
        throw ApiError::invalid(fmt::format("'{}' is not a readable image: {}", where, e.what()), where, "invalid_image");
    }
}

vision::EncodedImage ImageInput::encode_checked(std::span<const uint8_t> bytes, const std::string& where,
                                                int64_t max_tokens) {
    // Decoding, resizing and hashing need no lock: only the tower is one at a time.
    vision::PreparedImage prepared = encoder_->prepare(bytes, where);
    // An image runs whole in one engine step: one of more tokens than a step takes never could.
    if (max_tokens > 0 && prepared.tokens() > max_tokens)
        throw ApiError::invalid(fmt::format("'{}' is an image of {} tokens (a {} x {} grid after resizing), more than the {} "
                                            "image tokens one engine step takes (--max-image-tokens / "
                                            "--max-batched-tokens; `pagoda chat`: --chunk)",
                                            where, prepared.tokens(), prepared.grid_h, prepared.grid_w, max_tokens),
                                where, "invalid_image");
    // The hash covers the decoded pixels and the image's size, which fixes Qwen3-VL's grid too.
    const vision::ImageCacheKey key{.projector = encoder_->projector_id(), .pixels = prepared.hash};
    vision::EncodedImage out{.hash = prepared.hash, .grid_h = prepared.grid_h, .grid_w = prepared.grid_w};
    if (cache_)
        if (auto hit = cache_->find(key)) {
            out.embeddings = std::move(*hit);
            return out;
        }
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
    const int32_t marker = qwen3vl_ ? qwen_ids_.pad : gemma4v_ ? ids_.soft : ids_.start;
    size_t markers = 0;
    for (int32_t id : prompt) markers += id == marker ? 1 : 0;
    if (markers != images.size())
        throw ApiError::invalid(fmt::format("the rendered prompt holds {} image markers ({}) for {} images: the chat "
                                            "template renders no image where a part was, or a message's text spells "
                                            "the marker",
                                            markers, marker_, images.size()),
                                param, "invalid_image");
    size_t added = 0;
    for (const vision::EncodedImage& image : images) added += size_t(image.tokens()) + 8;
    std::vector<int32_t> out;
    std::vector<engine::PromptImage> spans;
    out.reserve(prompt.size() + added);
    for (int32_t id : prompt) {
        if (id != marker) {
            out.push_back(id);
            continue;
        }
        vision::EncodedImage& image = images[spans.size()];
        engine::PromptImage span{.rows = qwen3vl_ || gemma4v_ ? image.tokens() : tokens_per_image_,
                                 .embeddings = std::move(image.embeddings), .hash = image.hash};
        if (qwen3vl_) {
            // The template wrote <|vision_start|> and <|vision_end|> around the pad; transformers'
            // processor, too, repeats the pad alone.
            span.begin = int64_t(out.size());
            out.insert(out.end(), size_t(span.rows), qwen_ids_.pad);
            span.grid_h = image.grid_h;
            span.grid_w = image.grid_w;
        } else if (gemma4v_) {
            span.begin = vision::append_gemma4_image(out, ids_, span.rows);
        } else {
            span.begin = vision::append_gemma3_image(out, ids_, tokens_per_image_);
        }
        spans.push_back(std::move(span));
    }
    prompt = std::move(out);
    return spans;
}

}  // namespace pagoda::server
