// The Responses request as a /v1/chat/completions body (declared in responses_request.h): the
// one place where Responses items become chat messages, so the chat template renders both APIs'
// conversations the same way.
#include <fmt/format.h>
#include <regex>

#include "server/image_parts.h"
#include "server/responses_request.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

// The text of a content value: a string, or its text parts joined (refusals count as text).
std::string content_text(const json& content) {
    if (content.is_string()) return content.get<std::string>();
    std::string text;
    for (const json& part : content) {
        if (auto t = part.find("text"); t != part.end() && t->is_string()) text += t->get<std::string>();
        else if (auto r = part.find("refusal"); r != part.end() && r->is_string()) text += r->get<std::string>();
    }
    return text;
}

// A user, system or developer message's content: its text, or where it holds input_image parts,
// chat parts (text and image_url) in order.
json message_content(const json& content) {
    if (!content.is_array()) return content_text(content);
    bool images = false;
    for (const json& part : content) images = images || part.value("type", "") == "input_image";
    if (!images) return content_text(content);
    json parts = json::array();
    for (const json& part : content) {
        if (part.value("type", "") == "input_image") {
            json chat = image_url_part(part["image_url"].get<std::string>());
            if (auto d = part.find("detail"); d != part.end()) chat["image_url"]["detail"] = *d;
            parts.push_back(std::move(chat));
        } else {
            parts.push_back({{"type", "text"}, {"text", content_text(json::array({part}))}});
        }
    }
    return parts;
}

std::string reasoning_text(const json& item) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
        auto parts = item.find(key);
        if (parts == item.end() || !parts->is_array()) continue;
        for (const json& p : *parts) text += p.value("text", "");
        if (!text.empty()) break;  // the content is the thinking; a summary only stands in for it
    }
    return text;
}

}  // namespace

json responses_items_to_messages(const json& items, std::vector<size_t>* first_item) {
    json messages = json::array();
    size_t item_index = 0;  // the item being translated
    // Records the origin of each message pushed since the last call (at most one per item).
    auto note_origin = [&] {
        if (first_item)
            while (first_item->size() < messages.size()) first_item->push_back(item_index);
    };
    std::string reasoning;       // a reasoning item's text, for the assistant message that follows
    bool assistant_open = false;  // the last message is assistant output this run of items may extend
    auto assistant = [&]() -> json& {
        if (!assistant_open) {
            messages.push_back({{"role", "assistant"}, {"content", ""}});
            assistant_open = true;
        }
        json& m = messages.back();
        if (!reasoning.empty()) {
            m["reasoning_content"] = m.value("reasoning_content", "") + reasoning;
            reasoning.clear();
        }
        return m;
    };
    for (const json& item : items) {
        const std::string type = item.value("type", "message");
        if (type == "message") {
            const std::string role = item["role"].get<std::string>();
            if (role == "assistant") {
                json& m = assistant();
                m["content"] = m["content"].get<std::string>() + content_text(item["content"]);
            } else {
                messages.push_back({{"role", role}, {"content", message_content(item["content"])}});
                assistant_open = false;
                reasoning.clear();  // thinking that led to no answer (cut off) belongs to no message
            }
        } else if (type == "function_call") {
            json& m = assistant();
            if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
            m["tool_calls"].push_back({{"id", item["call_id"]},
                                       {"type", "function"},
                                       {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
        } else if (type == "function_call_output") {
            json tool = {{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", content_text(item["output"])}};
            // Templates that name the function a result came from (Llama 3.1, Mistral) read `name`.
            for (const json& m : messages)
                for (const json& call : m.value("tool_calls", json::array()))
                    if (call["id"] == item["call_id"]) tool["name"] = call["function"]["name"];
            messages.push_back(std::move(tool));
            assistant_open = false;
            reasoning.clear();
        } else if (type == "reasoning") {
            reasoning += reasoning_text(item);
        }
        note_origin();
        ++item_index;
    }
    return messages;
}

std::vector<MessageOrigin> responses_message_origins(const ResponsesRequest& r, const json& conversation,
                                                     size_t stored_items) {
    std::vector<MessageOrigin> origins;
    if (r.instructions) origins.push_back({"instructions", false});
    std::vector<size_t> first_item;
    responses_items_to_messages(conversation, &first_item);
    for (size_t k : first_item) {
        if (k < stored_items) {
            origins.push_back({"previous_response_id", false});
            continue;
        }
        const json& item = conversation[k];
        const bool message = item.value("type", "message") == "message" && item.value("role", "") != "assistant";
        origins.push_back({fmt::format("input[{}]", k - stored_items), message});
    }
    return origins;
}

nlohmann::ordered_json responses_chat_body(const ResponsesRequest& r, const json& conversation) {
    using ojson = nlohmann::ordered_json;  // the schemas keep their properties' order
    ojson body = ojson::object();
    if (!r.model.empty()) body["model"] = r.model;
    json messages = json::array();
    if (r.instructions) messages.push_back({{"role", "system"}, {"content", *r.instructions}});
    for (json& m : responses_items_to_messages(conversation)) messages.push_back(std::move(m));
    body["messages"] = std::move(messages);
    if (!r.tools.empty()) {
        ojson tools = ojson::array();
        for (const ojson& t : r.tools) {
            ojson fn = {{"name", t["name"]}};
            for (const char* key : {"description", "parameters", "strict"})
                if (auto it = t.find(key); it != t.end() && !it->is_null()) fn[key] = *it;
            tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
        }
        body["tools"] = std::move(tools);
        body["parallel_tool_calls"] = r.parallel_tool_calls;
    }
    if (r.tool_choice.is_object())
        body["tool_choice"] = {{"type", "function"}, {"function", {{"name", r.tool_choice["name"]}}}};
    else if (r.tool_choice != "auto")
        body["tool_choice"] = r.tool_choice;
    if (!r.reasoning_effort.empty()) body["reasoning_effort"] = r.reasoning_effort;
    const std::string format = r.text_format["type"].get<std::string>();
    if (format == "json_object") {
        body["response_format"] = {{"type", "json_object"}};
    } else if (format == "json_schema") {
        ojson spec = ojson::object();
        for (const char* key : {"name", "schema", "strict"})
            if (auto it = r.text_format.find(key); it != r.text_format.end() && !it->is_null()) spec[key] = *it;
        body["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
    }
    if (r.max_output_tokens) body["max_completion_tokens"] = *r.max_output_tokens;
    if (r.temperature) body["temperature"] = *r.temperature;
    if (r.top_p) body["top_p"] = *r.top_p;
    body["stream"] = r.stream;
    return body;
}

ApiError map_chat_error(ApiError e, const std::vector<MessageOrigin>& origins) {
    static const std::vector<std::pair<std::regex, std::string>> renames = {
        {std::regex(R"(\bmax_completion_tokens\b)"), "max_output_tokens"},
        {std::regex(R"(\bresponse_format\.json_schema\b)"), "text.format"},
        {std::regex(R"(\bresponse_format\b)"), "text.format"},
        {std::regex(R"(\b(tools\[\d+\])\.function\b)"), "$1"},
        {std::regex(R"(\breasoning_effort\b)"), "reasoning.effort"},
    };
    // messages[k] and the path below it (".content[j].image_url.url"), up to a quote or space.
    static const std::regex message(R"(\bmessages\b(?:\[(\d{1,9})\]([.\[][^\s'"]*)?)?)");
    auto message_path = [&](const std::smatch& m) -> std::string {
        if (!m[1].matched) return "input";
        const size_t k = std::stoul(m[1].str());
        if (k >= origins.size()) return "input";
        const MessageOrigin& o = origins[k];
        const std::string below = m[2].str();
        return o.same_parts && below.rfind(".content[", 0) == 0 ? o.path + below : o.path;
    };
    auto rename = [&](std::string s) {
        std::string out;
        auto from = s.cbegin();
        for (std::sregex_iterator it(s.cbegin(), s.cend(), message), end; it != end; ++it) {
            out.append(from, (*it)[0].first);
            out += message_path(*it);
            from = (*it)[0].second;
        }
        out.append(from, s.cend());
        for (const auto& [re, to] : renames) out = std::regex_replace(out, re, to);
        return out;
    };
    ApiError mapped(e.status, rename(e.what()), e.type, rename(e.param), e.code);
    mapped.retry_after = e.retry_after;
    return mapped;
}

}  // namespace pagoda::server
