// The history of a `pagoda chat` session and its prompt: an optional system message, then user and
// assistant turns, rendered by the chat template with the generation prompt and tokenised the way
// the server tokenises chat requests (special-token text parsed; BOS added only when the
// vocabulary wants one and the template did not write it). Rendering the whole history each turn
// keeps the template in charge of every turn's text; the engine's prefix cache makes the repeated
// part cheap. With images (`chat --mmproj`, /image PATH) a user message holds image parts at its
// <__media__> markers (or before its text), the encoded images stay with their message, and each
// render expands the template's image markers into them (server/image_input.h), so the prefix
// cache keys them by their hashes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/request.h"
#include "server/image_input.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {

struct ChatPrompt {
    std::string text;            // as rendered
    std::vector<int32_t> ids;    // as the model sees it (images expanded into their soft tokens)
    std::vector<engine::PromptImage> images;  // the conversation's images in ids
    bool opens_thinking = false; // the generation prompt ends inside <think> (the reply starts in reasoning)
};

class Conversation {
public:
    explicit Conversation(std::string system_prompt) : system_(std::move(system_prompt)) { clear(); }

    void add(const std::string& role, const std::string& content) {
        messages_.push_back({{"role", role}, {"content", content}});
    }
    // A user message with images: image i where the text's i-th <__media__> marker stands, or with
    // no marker all images before the text; image parts for a template that takes content parts,
    // else the model's image marker (server::ImageInput::marker()) in its text. Throws pagoda::Error
    // naming both counts when the text holds markers but another number of them than images.
    void add_user(const std::string& content, std::vector<vision::EncodedImage> images, bool template_takes_parts,
                  const std::string& image_marker = server::kImageMarker);
    void drop_last() {
        if (messages_.size() > (system_.empty() ? 0u : 1u)) messages_.erase(messages_.end() - 1);
        while (!images_.empty() && images_.back().first >= messages_.size()) images_.pop_back();
    }
    // Back to the system message alone.
    void clear() {
        messages_ = nlohmann::json::array();
        images_.clear();
        if (!system_.empty()) add("system", system_);
    }
    size_t turns() const { return messages_.size() - (system_.empty() ? 0 : 1); }

    // Throws pagoda::Error when the template rejects the conversation (raise_exception) or fails.
    // `images`: the image input, where the conversation holds images (ApiError when the template
    // renders no marker for one).
    ChatPrompt render(const chat::ChatTemplate& tmpl, const tokenizer::Tokenizer& tok,
                      const server::ImageInput* images = nullptr) const;

private:
    std::string system_;
    nlohmann::json messages_;
    std::vector<std::pair<size_t, vision::EncodedImage>> images_;  // (message index, image), in order
};

}  // namespace pagoda::app
