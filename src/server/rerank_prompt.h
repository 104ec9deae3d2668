// How a decoder reranker (Qwen3-Reranker style) is asked about one (query, document) pair: a
// prompt form with the placeholders {query} and {document}, and the two answer tokens whose
// last-position logits give the score sigmoid(logit(yes) - logit(no)).
//
// The form comes from `--rerank-template FILE` (the file's text), else the model file's
// `tokenizer.chat_template.rerank` (llama.cpp's key), else the chat template rendered with
// Qwen3-Reranker's instruction: a system message asking for "yes" or "no", a user message
// "<Instruct>: …\n<Query>: {query}\n<Document>: {document}", the generation prompt, thinking off.
// Substitution is one pass over the form: text inside a query or document is never expanded again,
// and braces that are not one of the two placeholders stay as they are.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::chat {
class ChatTemplate;
}
namespace pagoda::tokenizer {
class Tokenizer;
class Vocab;
}

namespace pagoda::server {

class RerankPrompt {
public:
    // A form with both placeholders; throws pagoda::Error naming `origin` when one is missing.
    static RerankPrompt from_form(std::string form, std::string_view origin);
    // The form the chat template renders for Qwen3-Reranker's instruction (above).
    static RerankPrompt from_chat_template(const chat::ChatTemplate& tmpl, const std::string& bos,
                                           const std::string& eos);

    std::string render(std::string_view query, std::string_view document) const;
    // The rendered prompt's tokens, as a chat prompt's: the whole text at once with special-token
    // texts parsed (as the model's reference code tokenizes it), BOS added when the vocabulary wants
    // one and the form did not already write it; no EOS.
    std::vector<int32_t> tokenize(const tokenizer::Tokenizer& tok, std::string_view query,
                                  std::string_view document) const;
    const std::string& form() const { return form_; }

private:
    std::string form_;
};

// A classification-head reranker's pair without a prompt form, as llama-server builds it: BOS when
// the vocabulary adds one, the query, EOS (SEP when there is no EOS) when the vocabulary adds one,
// SEP when `add_sep`, the document, that EOS again. Query and document are encoded as plain text
// (no special-token texts parsed, nothing added).
std::vector<int32_t> rerank_pair_tokens(const tokenizer::Tokenizer& tok, std::string_view query,
                                        std::string_view document, bool add_sep);

// The yes/no answer tokens: `spec` "YES,NO" names two tokens by their vocabulary text (or, when no
// token has that text, by id); empty: the tokens "yes" and "no". nullopt when the default tokens are
// not in the vocabulary; throws pagoda::Error for a spec that does not name two distinct tokens.
std::optional<std::pair<int32_t, int32_t>> rerank_answer_tokens(const tokenizer::Vocab& vocab, std::string_view spec);

}  // namespace pagoda::server
