// libFuzzer entry for HTTP request handling: raw bytes (request line, headers, body) through
// Boost.Beast's request_parser with the limits src/server/http_session.cpp sets, then routed as
// its route table (http_routes.cpp) does: the header checks and credentials of http_auth.h, request
// id and bearer-key checks, and for each endpoint the gateway's parsing
// (parse_json_body, the completion pipeline for both endpoints and /infill, /tokenize and
// /detokenize, /v1/embeddings, POST /admin/models/{id}/reload's path and body), CORS (a preflight OPTIONS, and the Access-Control-* headers every
// answer gets for its Origin), ending in the response bytes (format_head + ApiError body) the session writes.
// Oracle: the parser may fail only with a Beast error; routing may refuse only with ApiError.
#include <boost/beast/websocket.hpp>
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz/fuzz_support.h"
#include "server/api_error.h"
#include "server/api_keys.h"
#include "server/http_auth.h"
#include "server/http_common.h"
#include "server/model_reload_request.h"
#include "server/tokenize_request.h"

namespace {

using namespace pagoda;
using namespace pagoda::server;
using namespace pagoda::server::transport;

constexpr uint64_t kBodyLimit = 1 << 20;  // the fuzz corpus keeps inputs below this anyway

const ApiKeyTable& keys() {
    static const ApiKeyTable table =
        ApiKeyTable::parse("sk-fuzz-1 name=alice rpm=60 tpm=1000 concurrency=2\nsk-fuzz-2  # open\n", "fuzz keys");
    return table;
}

const CorsPolicy& cors() {
    static const CorsPolicy policy({"http://app.example:3000", "HTTPS://Other.Example/"});
    return policy;
}

// The session's routing without the socket: returns the status it would answer.
int route(const http::request<http::string_body>& req) {
    if (auto refusal = refuse_header(req)) return refusal->status;
    if (req.method() == http::verb::options) {  // the session's preflight()
        const auto headers = cors().preflight_headers(req[http::field::origin], req[http::field::access_control_request_headers]);
        (void)format_head(204, headers);
        return cors().allows(req[http::field::origin]) ? 204 : 403;
    }
    const std::string path(req.target().substr(0, req.target().find('?')));
    (void)valid_request_id(req["x-request-id"]);
    const ApiKey* key = keys().find(bearer_token(request_credentials(req)));
    const bool authorised = key != nullptr;
    const tokenizer::Tokenizer* tok = fuzz::small_tokenizer();
    const auto& templates = fuzz::builtin_templates();
    const chat::ChatTemplate* tmpl = &templates[std::hash<std::string>{}(path + std::string(req.method_string())) % templates.size()];
    if (path == "/v1/ws") return beast::websocket::is_upgrade(req) ? 101 : 426;
    if (path == "/tokenize" || path == "/detokenize") {
        const nlohmann::json body = parse_json_body(req.body());
        if (!tok) return 503;
        (void)dump_json(path == "/tokenize" ? tokenize_response(body, *tok) : detokenize_response(body, *tok));
        return 200;
    }
    if (path.starts_with(kAdminModelsPrefix)) {
        const ReloadRequest reload = parse_reload_request(path, req.body());
        if (reload.id.empty() || (reload.path && reload.path->empty())) __builtin_trap();
        return authorised ? 202 : 401;
    }
    Endpoint endpoint;
    if (path == "/v1/completions") endpoint = Endpoint::completions;
    else if (path == "/infill") endpoint = Endpoint::infill;
    else if (path == "/v1/chat/completions") endpoint = Endpoint::chat_completions;
    else if (path == "/v1/embeddings") endpoint = Endpoint::embeddings;
    else throw ApiError::not_found("no route");
    if (req.method() != http::verb::post) throw ApiError::method_not_allowed("use POST");
    const nlohmann::json body = parse_json_body(req.body());
    if (endpoint == Endpoint::embeddings) fuzz::run_embedding_pipeline(body, tok);
    else if (endpoint == Endpoint::infill) fuzz::run_completion_pipeline(body, endpoint, tmpl, fuzz::fim_tokenizer());
    else fuzz::run_completion_pipeline(body, endpoint, tmpl, tok);
    return authorised ? 200 : 401;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    parser.header_limit(64 * 1024);
    parser.eager(true);
    beast::error_code ec;
    // Feed the bytes in the pieces a socket might deliver them in (the first byte picks the size);
    // like Beast's read loop, unconsumed bytes stay in the window when the parser needs more.
    const size_t piece = size ? 1 + data[0] % 97 : 1;
    size_t offset = 0, end = std::min(size, piece);
    while (!parser.is_done()) {
        const size_t used = parser.put(net::buffer(data + offset, end - offset), ec);
        offset += used;
        if (ec == http::error::need_more || (!ec && used == 0)) {
            ec = {};
            if (end == size) break;
            end = std::min(size, end + piece);
            continue;
        }
        if (ec) break;
        if (offset == end) {
            if (end == size) break;
            end = std::min(size, end + piece);
        }
    }
    if (!ec && !parser.is_done()) parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;  // http_session answers 400/413/431 or closes

    int status = 200;
    std::string body;
    try {
        status = route(parser.get());
    } catch (const ApiError& e) {
        status = e.status;
        body = dump_json(e.body());
    } catch (const std::exception& e) {
        fuzz::unexpected("http route", e);
    }
    const std::string head = format_head(status, {{"Content-Length", std::to_string(body.size())}, {"X-Request-Id", "fuzz"}},
                                         cors().answer_headers(parser.get()[http::field::origin]));
    if (head.size() < 12 || head.compare(0, 9, "HTTP/1.1 ") != 0) __builtin_trap();
    return 0;
}
