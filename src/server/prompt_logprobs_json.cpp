#include "server/prompt_logprobs_json.h"

#include <algorithm>
#include <string>

#include "tokenizer/tokenizer.h"

namespace pagoda::server {

using json = nlohmann::json;

namespace {

std::string piece(const tokenizer::Tokenizer* tok, int32_t id) {
    return tok ? tok->token_to_piece(id) : std::to_string(id);
}

}  // namespace

json vllm_prompt_logprobs(const std::vector<engine::TokenLogprob>& lps, const tokenizer::Tokenizer* tok) {
    json out = json::array({nullptr});
    for (const auto& lp : lps) {
        json entry = json::object();
        entry[std::to_string(lp.token)] = {{"logprob", lp.logprob}, {"rank", lp.rank}, {"decoded_token", piece(tok, lp.token)}};
        int32_t rank = 0;
        for (const auto& [id, l] : lp.top) {
            ++rank;
            const std::string key = std::to_string(id);
            if (!entry.contains(key)) entry[key] = {{"logprob", l}, {"rank", rank}, {"decoded_token", piece(tok, id)}};
        }
        out.push_back(std::move(entry));
    }
    return out;
}

json echoed_prompt_logprobs(int32_t first_token, const std::vector<engine::TokenLogprob>& lps,
                            const tokenizer::Tokenizer* tok, size_t text_size) {
    json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
    // A token's offset is where it starts in the echoed text: the length of the text the tokens
    // before it decode to (control tokens such as BOS decode to nothing).
    std::vector<int32_t> before;
    auto add = [&](int32_t id, json logprob, json top) {
        tokens.push_back(piece(tok, id));
        token_lps.push_back(std::move(logprob));
        tops.push_back(std::move(top));
        offsets.push_back(tok ? tok->decode(before).size() : before.size());
        before.push_back(id);
    };
    add(first_token, nullptr, nullptr);
    for (const auto& lp : lps) {
        json top = json::object();
        for (const auto& [id, l] : lp.top) top[piece(tok, id)] = l;
        add(lp.token, lp.logprob, std::move(top));
    }
    // A prefix that ends inside a character decodes with a replacement character, and a leading
    // space may go once more text follows: clamp each offset to those after it, to the whole
    // prompt's text and to the echoed text, so the offsets never decrease and stay inside it.
    size_t next = std::min(text_size, tok ? tok->decode(before).size() : before.size());
    for (size_t i = offsets.size(); i-- > 0;) {
        next = std::min(next, offsets[i].get<size_t>());
        offsets[i] = next;
    }
    return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace pagoda::server
