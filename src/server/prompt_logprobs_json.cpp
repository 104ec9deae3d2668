#include "server/prompt_logprobs_json.h"

#include <algorithm>
#include <optional>
#include <string>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {

using json = nlohmann::json;

std::string token_piece(const tokenizer::Tokenizer* tok, int32_t id) {
    return tok ? tok->token_to_piece(id) : std::to_string(id);
}

json vllm_prompt_logprobs(const std::vector<engine::TokenLogprob>& lps, const tokenizer::Tokenizer* tok) {
    json out = json::array({nullptr});
    for (const auto& lp : lps) {
        json entry = json::object();
        entry[std::to_string(lp.token)] = {
            {"logprob", lp.logprob}, {"rank", lp.rank}, {"decoded_token", token_piece(tok, lp.token)}};
        int32_t rank = 0;
        for (const auto& [id, l] : lp.top) {
            ++rank;
            const std::string key = std::to_string(id);
            if (!entry.contains(key))
                entry[key] = {{"logprob", l}, {"rank", rank}, {"decoded_token", token_piece(tok, id)}};
        }
        out.push_back(std::move(entry));
    }
    return out;
}

json echoed_prompt_logprobs(int32_t first_token, const std::vector<engine::TokenLogprob>& lps,
                            const tokenizer::Tokenizer* tok, size_t text_size) {
    json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
    // A token's offset is where it starts in the echoed text: the length of what the tokens before
    // it decode to, streamed (a character cut between tokens counts once complete; control tokens
    // such as BOS decode to nothing), and never past the echoed text.
    std::optional<tokenizer::StreamDecoder> stream;
    if (tok) stream.emplace(*tok);
    size_t decoded = 0;
    auto add = [&](int32_t id, json logprob, json top) {
        tokens.push_back(token_piece(tok, id));
        token_lps.push_back(std::move(logprob));
        tops.push_back(std::move(top));
        offsets.push_back(std::min(decoded, text_size));
        decoded += stream ? stream->feed(id).size() : 1;
    };
    add(first_token, nullptr, nullptr);
    for (const auto& lp : lps) {
        json top = json::object();
        for (const auto& [id, l] : lp.top) top[token_piece(tok, id)] = l;
        add(lp.token, lp.logprob, std::move(top));
    }
    return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace pagoda::server
