// The history of a `pagoda chat` session and its prompt: an optional system message, then user and
// assistant turns, rendered by the chat template with the generation prompt and tokenised the way
// the server tokenises chat requests (special-token text parsed; BOS added only when the
// vocabulary wants one and the template did not write it). Rendering the whole history each turn
// keeps the template in charge of every turn's text; the engine's prefix cache makes the repeated
// part cheap.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {

struct ChatPrompt {
    std::string text;            // as rendered
    std::vector<int32_t> ids;    // as the model sees it
    bool opens_thinking = false; // the generation prompt ends inside <think> (the reply starts in reasoning)
};

class Conversation {
public:
    explicit Conversation(std::string system_prompt) : system_(std::move(system_prompt)) { clear(); }

    void add(const std::string& role, const std::string& content) {
        messages_.push_back({{"role", role}, {"content", content}});
    }
    void drop_last() {
        if (messages_.size() > (system_.empty() ? 0u : 1u)) messages_.erase(messages_.end() - 1);
    }
    // Back to the system message alone.
    void clear() {
        messages_ = nlohmann::json::array();
        if (!system_.empty()) add("system", system_);
    }
    size_t turns() const { return messages_.size() - (system_.empty() ? 0 : 1); }

    // Throws pagoda::Error when the template rejects the conversation (raise_exception) or fails.
    ChatPrompt render(const chat::ChatTemplate& tmpl, const tokenizer::Tokenizer& tok) const;

private:
    std::string system_;
    nlohmann::json messages_;
};

}  // namespace pagoda::app
