// POST /tokenize and POST /detokenize, llama-server's shapes, without sockets or a gateway:
//   {"content": "text", "add_special": false, "parse_special": false, "with_pieces": false}
//     -> {"tokens": [ids]}  or, with_pieces, {"tokens": [{"id": 1, "piece": "text" | [bytes]}]}
//       (a piece that is not valid UTF-8 on its own is given as its byte values)
//   {"tokens": [ids]} -> {"content": "text"}
// add_special adds the vocabulary's BOS/EOS as encode() would; parse_special matches control-token
// text (off by default, as for prompts). Every problem is an ApiError 400 naming the field; any
// other field is refused (400 unsupported_parameter), as on the completion endpoints.
#pragma once
#include <nlohmann/json.hpp>

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::server {

nlohmann::json tokenize_response(const nlohmann::json& body, const tokenizer::Tokenizer& tokenizer);
nlohmann::json detokenize_response(const nlohmann::json& body, const tokenizer::Tokenizer& tokenizer);

}  // namespace pagoda::server
