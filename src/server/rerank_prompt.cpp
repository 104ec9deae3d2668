#include "server/rerank_prompt.h"

#include <charconv>

#include "chat/chat_template.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

constexpr std::string_view kQuery = "{query}", kDocument = "{document}";

// Qwen3-Reranker's instruction, as its model card builds the prompt.
constexpr const char* kSystem =
    "Judge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the "
    "answer can only be \"yes\" or \"no\".";
constexpr const char* kUser =
    "<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n"
    "<Document>: {document}";

int32_t token_of(const tokenizer::Vocab& vocab, std::string_view name) {
    if (name.empty()) fail("--rerank-tokens names an empty token; give two tokens as YES,NO");
    if (const int32_t id = vocab.find(name); id != tokenizer::kNoToken) return id;
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (ec == std::errc() && end == name.data() + name.size() && id >= 0 && id < vocab.n_tokens()) return int32_t(id);
    fail("--rerank-tokens: '{}' is not a token of this vocabulary (nor a token id below {})", name, vocab.n_tokens());
}

}  // namespace

RerankPrompt RerankPrompt::from_form(std::string form, std::string_view origin) {
    if (form.find(kQuery) == std::string::npos || form.find(kDocument) == std::string::npos)
        fail("the rerank template ({}) must contain both {} and {}", origin, kQuery, kDocument);
    RerankPrompt p;
    p.form_ = std::move(form);
    return p;
}

RerankPrompt RerankPrompt::from_chat_template(const chat::ChatTemplate& tmpl, const std::string& bos,
                                              const std::string& eos) {
    const nlohmann::json messages = nlohmann::json::array(
        {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", kUser}}});
    chat::ChatRenderOptions o;
    o.bos_token = bos;
    o.eos_token = eos;
    o.extra["enable_thinking"] = false;  // Qwen3's template then writes the empty think block the model expects
    return from_form(tmpl.render(messages, o), "rendered from the chat template");
}

std::string RerankPrompt::render(std::string_view query, std::string_view document) const {
    std::string out;
    out.reserve(form_.size() + query.size() + document.size());
    std::string_view rest = form_;
    while (!rest.empty()) {
        const size_t brace = rest.find('{');
        if (brace == std::string_view::npos) break;
        out.append(rest.substr(0, brace));
        rest.remove_prefix(brace);
        if (rest.starts_with(kQuery)) {
            out.append(query);
            rest.remove_prefix(kQuery.size());
        } else if (rest.starts_with(kDocument)) {
            out.append(document);
            rest.remove_prefix(kDocument.size());
        } else {
            out.push_back('{');
            rest.remove_prefix(1);
        }
    }
    out.append(rest);
    return out;
}

std::vector<int32_t> RerankPrompt::tokenize(const tokenizer::Tokenizer& tok, std::string_view query,
                                            std::string_view document) const {
    std::vector<int32_t> ids =
        tok.encode(render(query, document), {.add_bos = false, .add_eos = false, .parse_special = true});
    if (tok.vocab().add_bos() && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
        ids.insert(ids.begin(), tok.bos());
    return ids;
}

std::vector<int32_t> rerank_pair_tokens(const tokenizer::Tokenizer& tok, std::string_view query,
                                        std::string_view document, bool add_sep) {
    const tokenizer::Vocab& vocab = tok.vocab();
    const tokenizer::EncodeOptions plain{.add_bos = false, .add_eos = false, .parse_special = false};
    const int32_t end = vocab.eos() >= 0 ? vocab.eos() : vocab.sep();
    std::vector<int32_t> ids;
    if (vocab.add_bos() && vocab.bos() >= 0) ids.push_back(vocab.bos());
    for (int32_t id : tok.encode(query, plain)) ids.push_back(id);
    if (vocab.add_eos() && end >= 0) ids.push_back(end);
    if (add_sep && vocab.sep() >= 0) ids.push_back(vocab.sep());
    for (int32_t id : tok.encode(document, plain)) ids.push_back(id);
    if (vocab.add_eos() && end >= 0) ids.push_back(end);
    return ids;
}

std::optional<std::pair<int32_t, int32_t>> rerank_answer_tokens(const tokenizer::Vocab& vocab, std::string_view spec) {
    if (spec.empty()) {
        const int32_t yes = vocab.find("yes"), no = vocab.find("no");
        if (yes == tokenizer::kNoToken || no == tokenizer::kNoToken) return std::nullopt;
        return std::pair{yes, no};
    }
    const size_t comma = spec.find(',');
    if (comma == std::string_view::npos || spec.find(',', comma + 1) != std::string_view::npos)
        fail("--rerank-tokens takes two tokens as YES,NO, got '{}'", spec);
    const int32_t yes = token_of(vocab, spec.substr(0, comma)), no = token_of(vocab, spec.substr(comma + 1));
    if (yes == no) fail("--rerank-tokens names the same token twice ('{}')", spec);
    return std::pair{yes, no};
}

}  // namespace pagoda::server
