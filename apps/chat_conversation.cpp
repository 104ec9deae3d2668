#include "apps/chat_conversation.h"

#include "chat/reasoning.h"

namespace pagoda::app {

ChatPrompt Conversation::render(const chat::ChatTemplate& tmpl, const tokenizer::Tokenizer& tok) const {
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
    return p;
}

}  // namespace pagoda::app
