#include "apps/chat_conversation.h"

#include "chat/reasoning.h"

namespace pagoda::app {

void Conversation::add_user(const std::string& content, std::vector<vision::EncodedImage> images,
                            bool template_takes_parts, const std::string& image_marker) {
    if (images.empty()) return add("user", content);
    nlohmann::json message = {{"role", "user"}};
    if (template_takes_parts) {
        nlohmann::json parts = nlohmann::json::array();
        for (size_t i = 0; i < images.size(); ++i) parts.push_back({{"type", "image"}});
        parts.push_back({{"type", "text"}, {"text", content}});
        message["content"] = std::move(parts);
    } else {
        std::string text;
        for (size_t i = 0; i < images.size(); ++i) text += image_marker;
        message["content"] = text + content;
    }
    messages_.push_back(std::move(message));
    for (auto& image : images) images_.emplace_back(messages_.size() - 1, std::move(image));
}

ChatPrompt Conversation::render(const chat::ChatTemplate& tmpl, const tokenizer::Tokenizer& tok,
                                const server::ImageInput* images) const {
    chat::ChatRenderOptions options;
    options.add_generation_prompt = true;
    if (tok.bos() >= 0) options.bos_token = tok.token_to_piece(tok.bos(), true);
    if (tok.eos() >= 0) options.eos_token = tok.token_to_piece(tok.eos(), true);
    ChatPrompt p;
    p.text = tmpl.render(messages_, options);
    p.opens_thinking = chat::prompt_opens_thinking(p.text);
    p.ids = tok.encode(p.text, {.add_bos = false, .add_eos = false, .parse_special = true});
    if (tok.vocab().add_bos() && tok.bos() >= 0 && (p.ids.empty() || p.ids.front() != tok.bos()))
        p.ids.insert(p.ids.begin(), tok.bos());
    if (images && !images_.empty()) {
        std::vector<vision::EncodedImage> encoded;
        for (const auto& [message, image] : images_) encoded.push_back(image);
        p.images = images->expand(p.ids, std::move(encoded));
    }
    return p;
}

}  // namespace pagoda::app
