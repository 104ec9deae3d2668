#include "apps/chat_conversation.h"

#include <string_view>

#include "chat/reasoning.h"
#include "core/error.h"

namespace pagoda::app {

void Conversation::add_user(const std::string& content, std::vector<vision::EncodedImage> images,
                            bool template_takes_parts, const std::string& image_marker) {
    if (images.empty()) return add("user", content);
    std::vector<std::string_view> pieces = server::media_pieces(content);
    if (pieces.size() == 1)  // no marker: the images before the text
        pieces.insert(pieces.begin(), images.size(), std::string_view());
    else if (pieces.size() - 1 != images.size())
        fail("the message holds {} {} markers for {} attached images (/image): give one image per marker (or no "
             "marker, to put the images before the text)",
             pieces.size() - 1, server::kMediaMarker, images.size());
    nlohmann::json message = {{"role", "user"}};
    if (template_takes_parts) {
        // Image i between pieces i and i + 1; empty text pieces are left out.
        nlohmann::json parts = nlohmann::json::array();
        for (size_t i = 0; i < pieces.size(); ++i) {
            if (!pieces[i].empty()) parts.push_back({{"type", "text"}, {"text", std::string(pieces[i])}});
            if (i < images.size()) parts.push_back({{"type", "image"}});
        }
        message["content"] = std::move(parts);
    } else {
        std::string text(pieces[0]);
        for (size_t i = 0; i < images.size(); ++i) (text += image_marker) += pieces[i + 1];
        message["content"] = std::move(text);
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
