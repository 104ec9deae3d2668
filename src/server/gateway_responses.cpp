// The gateway's /v1/responses, apart from gateway.cpp: the Responses body is parsed
// (responses_request.h), continued from a stored response when it names previous_response_id,
// expressed as a chat request and launched through exactly the chat pipeline; the Job turns the
// chat chunks into Responses events (responses_events.h) and, at the end, stores the response with
// its conversation (response_store.h). GET and DELETE /v1/responses/{id} read and drop stored ones.
#include <chrono>
#include <fmt/format.h>

#include "server/gateway.h"
#include "server/lora_choice.h"
#include "server/responses_events.h"
#include "server/responses_request.h"
#include "server/tool_request.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

ApiError not_stored(const std::string& id, const char* param, const char* code) {
    return ApiError(404,
                    fmt::format("no stored response has the id '{}': it never existed here, was made with store false, "
                                "or fell out of the in-memory store (its TTL passed, --responses-ttl, or newer responses "
                                "pushed it out, --responses-max; a restart empties it)",
                                id),
                    "invalid_request_error", param, code);
}

}  // namespace

std::shared_ptr<Job> Gateway::start_responses(const nlohmann::ordered_json& body, const ApiKey* key, const std::string& request_id,
                                              DeltaSink sink, std::string response_id) {
    if (response_id.empty()) response_id = new_request_id();
    const std::string key_name = key ? key->name : "anonymous";
    admit_or_throw(key_name);

    ResponsesRequest r;
    json conversation = json::array();
    CompletionParams p;
    std::optional<chat::ToolCallFormat> tool_format;
    std::vector<MessageOrigin> origins;  // per chat message, the Responses field its errors name
    try {
        r = parse_responses_request(json(body), &body);
        if (!r.previous_response_id.empty()) {
            auto previous = responses_store_.get(r.previous_response_id, now_seconds());
            if (!previous) throw not_stored(r.previous_response_id, "previous_response_id", "previous_response_not_found");
            conversation = previous->items;
        }
        const size_t stored_items = conversation.size();
        for (const json& item : r.input_items) conversation.push_back(item);
        origins = responses_message_origins(r, conversation, stored_items);
        p = parse_completion_request(responses_chat_body(r, conversation), Endpoint::chat_completions);
        p.max_tokens_param = "max_output_tokens";
        tool_format = apply_tools(p, template_ ? &*template_ : nullptr);
    } catch (const ApiError& e) {
        metrics_.on_rejection(key_name, "invalid");
        throw map_chat_error(e, origins);
    }

    ResponsesContext ctx;
    ctx.id = "resp_" + response_id;
    ctx.created_at =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ctx.model = served_model_id(options_.model_name, p.model);
    if (r.instructions) ctx.instructions = *r.instructions;
    if (r.max_output_tokens) ctx.max_output_tokens = *r.max_output_tokens;
    ctx.tools = r.tools;
    ctx.tool_choice = r.tool_choice;
    ctx.parallel_tool_calls = r.parallel_tool_calls;
    ctx.text_format = r.text_format;
    if (r.reasoning_summary) ctx.reasoning_summary = *r.reasoning_summary;
    ctx.temperature = p.temperature;
    ctx.top_p = p.top_p;
    if (!r.previous_response_id.empty()) ctx.previous_response_id = r.previous_response_id;
    ctx.store = r.store;
    ctx.metadata = r.metadata;
    if (r.user) ctx.user = *r.user;
    auto stream = std::make_unique<ResponsesStream>(std::move(ctx));
    try {
        return launch(std::move(p), tool_format, key, request_id, std::move(sink), "resp_" + response_id, [&](Job& job) {
            job.params_.endpoint = Endpoint::responses;  // metrics and the transport's framing
            job.responses_ = std::move(stream);
            job.responses_conversation_ = std::move(conversation);
        });
    } catch (const ApiError& e) {
        throw map_chat_error(e, origins);
    }
}

void Gateway::store_response(const ResponsesStream& stream, const json& conversation) {
    StoredResponse entry;
    entry.response = stream.response();
    entry.items = conversation;
    for (const json& item : stream.output()) entry.items.push_back(item);
    responses_store_.put(stream.context().id, std::move(entry), now_seconds());
}

SimpleResponse Gateway::stored_response(const std::string& id) {
    auto entry = responses_store_.get(id, now_seconds());
    if (!entry) throw not_stored(id, "response_id", "not_found");
    return {200, "application/json", dump_json(entry->response)};
}

SimpleResponse Gateway::delete_response(const std::string& id) {
    if (!responses_store_.erase(id, now_seconds())) throw not_stored(id, "response_id", "not_found");
    return {200, "application/json", dump_json(json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}})};
}

}  // namespace pagoda::server
