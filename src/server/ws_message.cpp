#include "server/ws_message.h"

#include "server/api_error.h"

namespace pagoda::server {

void decode_ws_envelope(std::string_view message, bool text, WsMessage& out) {
    out = WsMessage{};
    if (!text) throw ApiError::invalid("binary messages are not supported; send JSON text");
    out.object = parse_json_body(message);
    const nlohmann::ordered_json& msg = out.object;
    if (!msg.is_object()) throw ApiError::invalid("a message must be a JSON object");
    if (msg.contains("id")) out.id = nlohmann::json(msg["id"]);
    if (!out.id.is_string() && !out.id.is_number_integer())
        throw ApiError::invalid("'id' must be a string or an integer", "id");
    out.key = out.id.dump();
    if (msg.contains("type") && msg["type"] != "request") {
        if (msg["type"] != "cancel") throw ApiError::invalid("'type' must be \"cancel\" or absent", "type");
        out.cancel = true;
    }
}

WsRequestTarget ws_request_target(const WsMessage& message) {
    const nlohmann::ordered_json& msg = message.object;
    auto ep = msg.find("endpoint");
    if (ep == msg.end() || !ep->is_string()) throw ApiError::invalid("'endpoint' must be a string", "endpoint");
    Endpoint endpoint;
    if (*ep == "completions") endpoint = Endpoint::completions;
    else if (*ep == "chat.completions") endpoint = Endpoint::chat_completions;
    else if (*ep == "infill") endpoint = Endpoint::infill;
    else throw ApiError::invalid("'endpoint' must be \"completions\", \"chat.completions\" or \"infill\"", "endpoint");
    auto body = msg.find("body");
    if (body == msg.end() || !body->is_object()) throw ApiError::invalid("'body' must be a JSON object", "body");
    return {endpoint, &*body};
}

}  // namespace pagoda::server
