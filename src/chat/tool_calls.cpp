// The parser's core and the JSON-object formats (hermes, mistral, llama3_json). Qwen3-Coder's XML,
// DeepSeek's and harmony's states are in tool_calls_tagged.cpp, Gemma 4's in tool_calls_gemma4.cpp.
#include "chat/tool_calls.h"

#include <nlohmann/json.hpp>

#include "chat/text_scan.h"
#include "chat/tool_calls_markers.h"

namespace pagoda::chat {

void collect_tool_calls(std::vector<ToolCall>& calls, const std::vector<ToolCallDelta>& deltas) {
    for (const auto& d : deltas) {
        if (!d.name.empty() || calls.empty()) calls.push_back({d.name, ""});
        calls.back().arguments += d.arguments;
    }
}

ToolCallParser::ToolCallParser(ToolCallFormat format) : format_(format) {}

ToolCallParser::ToolCallParser(ToolCallFormat format, const nlohmann::json& tools) : format_(format) {
    if (!tools.is_array()) return;
    for (const auto& tool : tools) {
        if (!tool.is_object()) continue;
        const auto fn_it = tool.find("function");
        const nlohmann::json& fn = fn_it != tool.end() && fn_it->is_object() ? *fn_it : tool;
        const auto name = fn.find("name");
        const auto params = fn.find("parameters");
        if (name == fn.end() || !name->is_string() || params == fn.end() || !params->is_object()) continue;
        const auto props = params->find("properties");
        if (props == params->end() || !props->is_object()) continue;
        for (auto it = props->begin(); it != props->end(); ++it) {
            if (!it->is_object()) continue;
            const auto type = it->find("type");
            if (type == it->end()) continue;
            bool typed = false;
            if (type->is_string()) typed = type->get<std::string>() != "string";
            else if (type->is_array()) {
                typed = true;
                for (const auto& t : *type)
                    if (t == "string") typed = false;
            }
            if (typed) typed_params_[name->get<std::string>()].insert(it.key());
        }
    }
}

void ToolCallParser::emit_text(ToolCallParts& out, std::string_view text) {
    if (after_call_) text = text.substr(skip_space(text));
    if (text.empty()) return;
    size_t k = text.size();
    while (k > 0 && is_space(text[k - 1])) --k;
    if (k == 0) {
        held_ws_.append(text);
        return;
    }
    out.content += held_ws_;
    out.content.append(text.substr(0, k));
    held_ws_.assign(text.substr(k));
    after_call_ = false;
}

void ToolCallParser::give_back(ToolCallParts& out) {
    const std::string raw = std::move(raw_);
    raw_.clear();
    emit_text(out, raw);
    state_ = State::text;
    container_ = Container::none;
}

void ToolCallParser::to_text() {
    raw_.clear();
    state_ = State::text;
    container_ = Container::none;
}

void ToolCallParser::begin_call(ToolCallParts& out, std::string name) {
    held_ws_.clear();
    raw_.clear();
    in_call_ = true;
    out.calls.push_back({calls_, std::move(name), "", out.content.size()});
}

void ToolCallParser::add_arguments(ToolCallParts& out, std::string_view piece) {
    if (piece.empty()) return;
    if (!out.calls.empty() && out.calls.back().index == calls_) out.calls.back().arguments.append(piece);
    else out.calls.push_back({calls_, "", std::string(piece), out.content.size()});
}

void ToolCallParser::end_call() {
    in_call_ = false;
    after_call_ = true;
    ++calls_;
}

void ToolCallParser::consume(size_t n) {
    if (!in_call_) raw_.append(pending_, 0, n);
    pending_.erase(0, n);
}

void ToolCallParser::start_json() {
    reader_ = JsonCallReader();
    reader_sent_ = 0;
    reader_begun_ = false;
    state_ = State::json_call;
}

void ToolCallParser::run(ToolCallParts& out, bool final) {
    for (;;) {
        bool more = false;
        switch (state_) {
            case State::start:
            case State::text: more = step_text(out, final); break;
            case State::json_call:
            case State::hermes_open:
            case State::hermes_close:
            case State::llama3_between:
            case State::mistral_list:
            case State::mistral_next: more = step_json(out, final); break;
            case State::xml_block:
            case State::xml_name:
            case State::xml_params:
            case State::xml_param_name:
            case State::xml_value: more = step_xml(out, final); break;
            case State::ds_calls:
            case State::ds_header:
            case State::ds_name:
            case State::ds_fence:
            case State::ds_args:
            case State::ds_end: more = step_deepseek(out, final); break;
            case State::harmony_header:
            case State::harmony_args:
            case State::harmony_end: more = step_harmony(out, final); break;
            case State::object_args: more = step_object_args(out, final); break;
            case State::gemma4_header:
            case State::gemma4_args:
            case State::gemma4_end: more = step_gemma4(out, final); break;
        }
        if (!more) return;
    }
}

bool ToolCallParser::step_text(ToolCallParts& out, bool final) {
    if (state_ == State::start) {
        const size_t i = skip_space(pending_);
        const std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.empty()) {
            if (!final) return false;
            state_ = State::text;
            return true;
        }
        if (format_ == ToolCallFormat::llama3_json) {
            const bool tag = starts_with(rest, kPythonTag);
            if (tag || rest[0] == '{') {
                consume(i + (tag ? kPythonTag.size() : 0));
                container_ = Container::llama3;
                start_json();
                return true;
            }
            if (!final && starts_with(kPythonTag, rest)) return false;
        } else if (format_ == ToolCallFormat::mistral && rest[0] == '[' && !starts_with(rest, kMistralMarker)) {
            if (!final && starts_with(kMistralMarker, rest)) return false;  // maybe the marker still
            consume(i);
            container_ = Container::none;
            state_ = State::mistral_list;
            return true;
        }
        state_ = State::text;
        return true;
    }
    const std::vector<std::string_view>& markers = opening_markers(format_);
    size_t at = std::string::npos;
    std::string_view marker;
    for (std::string_view m : markers)
        if (const size_t p = pending_.find(m); p < at) at = p, marker = m;
    if (at != std::string::npos) {
        emit_text(out, std::string_view(pending_).substr(0, at));
        pending_.erase(0, at);
        raw_.clear();
        consume(marker.size());
        if (marker == kHermesOpen) state_ = State::hermes_open;
        else if (marker == kMistralMarker) container_ = Container::none, state_ = State::mistral_list;
        else if (marker == kDsCallsBegin) state_ = State::ds_calls;
        else if (marker == kGemma4CallOpen) state_ = State::gemma4_header;
        else if (marker == kMinimaxOpen) container_ = Container::none, state_ = State::xml_block;
        else state_ = State::harmony_header;
        return true;
    }
    size_t hold = 0;
    if (!final)
        for (std::string_view m : markers) hold = std::max(hold, partial_tag_suffix(pending_, m));
    emit_text(out, std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    return false;
}

bool ToolCallParser::step_json(ToolCallParts& out, bool final) {
    const size_t j = skip_space(pending_);
    const std::string_view rest = std::string_view(pending_).substr(j);
    switch (state_) {
        case State::json_call: {
            size_t i = 0;
            auto status = JsonCallReader::Status::reading;
            while (i < pending_.size()) {
                status = reader_.put(pending_[i]);
                if (status == JsonCallReader::Status::invalid || status == JsonCallReader::Status::stopped) break;
                ++i;
                if (status == JsonCallReader::Status::complete) break;
            }
            consume(i);
            if (!reader_begun_ && reader_.decided()) {
                begin_call(out, reader_.name());
                reader_begun_ = true;
            }
            if (reader_begun_) {
                add_arguments(out, std::string_view(reader_.arguments()).substr(reader_sent_));
                reader_sent_ = reader_.arguments().size();
            }
            if (status == JsonCallReader::Status::invalid) {
                give_back(out);
                return true;
            }
            const bool ended = status == JsonCallReader::Status::complete || status == JsonCallReader::Status::stopped;
            if (!ended && !final) return false;
            if (!reader_begun_) {  // the output ended before the call was decided
                give_back(out);
                return true;
            }
            end_call();
            if (!ended || container_ == Container::none || container_ == Container::mistral_single) to_text();
            else if (container_ == Container::hermes) state_ = State::hermes_close;
            else if (container_ == Container::llama3) state_ = State::llama3_between;
            else state_ = State::mistral_next;
            return true;
        }
        case State::hermes_open: {
            if (rest.empty()) {
                if (!final) return false;
                give_back(out);
                return true;
            }
            if (rest[0] == '{') {
                consume(j);
                container_ = Container::hermes;
                start_json();
                return true;
            }
            const Match m = match(rest, kFunctionOpen, final);
            if (m == Match::partial) return false;
            if (m == Match::yes) {
                consume(j + kFunctionOpen.size());
                state_ = State::xml_name;
                return true;
            }
            give_back(out);
            return true;
        }
        case State::hermes_close: {
            if (rest.empty() && !final) return false;
            const Match m = match(rest, kHermesClose, final);
            if (m == Match::partial) return false;
            if (m == Match::yes) consume(j + kHermesClose.size());
            to_text();
            return true;
        }
        case State::llama3_between: {
            if (rest.empty() && !final) return false;
            if (!rest.empty() && rest[0] == ';') {
                consume(j + 1);
                start_json();
                return true;
            }
            to_text();
            return true;
        }
        case State::mistral_list: {
            if (rest.empty()) {
                if (!final) return false;
                give_back(out);
                return true;
            }
            if (container_ == Container::none && rest[0] == '[') {
                consume(j + 1);
                container_ = Container::mistral_list;
                return true;
            }
            if (rest[0] != '{') {
                give_back(out);
                return true;
            }
            consume(j);
            if (container_ == Container::none) container_ = Container::mistral_single;
            start_json();
            return true;
        }
        case State::mistral_next: {
            if (rest.empty() && !final) return false;
            if (!rest.empty() && rest[0] == ',') {
                consume(j + 1);
                state_ = State::mistral_list;
                return true;
            }
            if (!rest.empty() && rest[0] == ']') consume(j + 1);
            to_text();
            return true;
        }
        default: return false;
    }
}

ToolCallParts ToolCallParser::feed(std::string_view text) {
    ToolCallParts out;
    pending_.append(text);
    run(out, false);
    return out;
}

ToolCallParts ToolCallParser::finish() {
    ToolCallParts out;
    run(out, true);
    if (calls_ == 0) out.content += held_ws_;
    held_ws_.clear();
    return out;
}

ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format, const nlohmann::json& tools) {
    ToolCallParser parser(format, tools);
    ParsedToolCalls result;
    for (ToolCallParts parts : {parser.feed(text), parser.finish()}) {
        result.content += parts.content;
        collect_tool_calls(result.calls, parts.calls);
    }
    return result;
}

ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format) {
    return parse_tool_calls(text, format, nlohmann::json());
}

}  // namespace pagoda::chat
