#include "chat/tool_calls.h"

#include <nlohmann/json.hpp>

#include "chat/text_scan.h"

namespace pagoda::chat {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr int kMaxDepth = 128;  // deeper JSON is not taken as a call (bounded parse work)

// Where the JSON object or array starting at s[0] ends (one past its closing bracket), by bracket
// depth outside strings; npos while it is still open, 0 when it cannot be JSON (too deep).
size_t json_value_end(std::string_view s) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '{' || c == '[') {
            if (++depth > kMaxDepth) return 0;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return std::string_view::npos;
}

bool parse_json(std::string_view text, ojson& out) {
    const size_t end = text.empty() || (text[0] != '{' && text[0] != '[') ? 0 : json_value_end(text);
    if (end == 0 || end == std::string_view::npos || skip_space(text, end) != text.size()) return false;
    out = ojson::parse(text.begin(), text.end(), nullptr, false);
    return !out.is_discarded();
}

// {"name": "f", "arguments"|"parameters": {...} | "json text"} -> a call.
bool call_from(const ojson& v, ToolCall& call) {
    if (!v.is_object()) return false;
    auto name = v.find("name");
    if (name == v.end() || !name->is_string() || name->get<std::string>().empty()) return false;
    auto args = v.find("arguments");
    if (args == v.end()) args = v.find("parameters");
    call.name = name->get<std::string>();
    if (args == v.end() || args->is_null()) call.arguments = "{}";
    else if (args->is_object()) call.arguments = args->dump();
    else if (args->is_string()) call.arguments = args->get<std::string>();
    else return false;
    return true;
}

}  // namespace

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

void ToolCallParser::add_call(ToolCallParts& out, ToolCall call) {
    held_ws_.clear();
    after_call_ = true;
    ++calls_;
    out.calls.push_back(std::move(call));
}

// A complete JSON value read after prefix_: the calls it holds, or false (then it is content).
bool ToolCallParser::take_json(ToolCallParts& out, std::string_view value) {
    ojson v;
    if (!parse_json(value, v)) return false;
    std::vector<ToolCall> calls;
    if (v.is_array() && format_ == ToolCallFormat::mistral) {
        if (v.empty()) return false;
        for (const auto& item : v) {
            ToolCall c;
            if (!call_from(item, c)) return false;
            calls.push_back(std::move(c));
        }
    } else {
        ToolCall c;
        if (!call_from(v, c)) return false;
        calls.push_back(std::move(c));
    }
    for (auto& c : calls) add_call(out, std::move(c));
    return true;
}

void ToolCallParser::run(ToolCallParts& out, bool final) {
    for (;;) {
        switch (state_) {
            case State::start: {
                const size_t i = skip_space(pending_);
                const std::string_view rest = std::string_view(pending_).substr(i);
                if (rest.empty()) {
                    if (!final) return;
                    state_ = State::text;
                    continue;
                }
                if (format_ == ToolCallFormat::llama3_json) {
                    if (starts_with(rest, kPythonTag)) {
                        prefix_ = pending_.substr(0, i + kPythonTag.size());
                        pending_.erase(0, i + kPythonTag.size());
                        state_ = State::json;
                        continue;
                    }
                    if (rest[0] == '{') {
                        prefix_ = pending_.substr(0, i);
                        pending_.erase(0, i);
                        state_ = State::json;
                        continue;
                    }
                    if (!final && starts_with(kPythonTag, rest)) return;
                } else if (format_ == ToolCallFormat::mistral && rest[0] == '[' && !starts_with(rest, kMistralMarker)) {
                    if (!final && starts_with(kMistralMarker, rest)) return;  // maybe the marker still
                    prefix_ = pending_.substr(0, i);
                    pending_.erase(0, i);
                    state_ = State::json;
                    continue;
                }
                state_ = State::text;
                continue;
            }
            case State::text: {
                std::string_view marker;
                if (format_ == ToolCallFormat::hermes) marker = kHermesOpen;
                else if (format_ == ToolCallFormat::mistral) marker = kMistralMarker;
                const size_t at = marker.empty() ? std::string::npos : pending_.find(marker);
                if (at != std::string::npos) {
                    emit_text(out, std::string_view(pending_).substr(0, at));
                    prefix_ = std::string(marker);
                    pending_.erase(0, at + marker.size());
                    state_ = format_ == ToolCallFormat::hermes ? State::tag_body : State::json;
                    continue;
                }
                const size_t hold = final || marker.empty() ? 0 : partial_tag_suffix(pending_, marker);
                emit_text(out, std::string_view(pending_).substr(0, pending_.size() - hold));
                pending_.erase(0, pending_.size() - hold);
                return;
            }
            case State::tag_body: {
                // The call's JSON is read by bracket depth first, so a close tag inside one of its
                // strings does not end it; anything else is read up to the first close tag.
                const size_t j = skip_space(pending_);
                if (j < pending_.size() && pending_[j] == '{') {
                    const size_t len = json_value_end(std::string_view(pending_).substr(j));
                    if (len == std::string::npos && !final) return;
                    if (len != std::string::npos && len != 0) {
                        const size_t after = skip_space(pending_, j + len);
                        const std::string_view rest = std::string_view(pending_).substr(after);
                        if (!final && rest.size() < kHermesClose.size() && starts_with(kHermesClose, rest)) return;
                        const bool closed = starts_with(rest, kHermesClose);
                        if ((closed || rest.empty()) && take_json(out, std::string_view(pending_).substr(j, len))) {
                            pending_.erase(0, closed ? after + kHermesClose.size() : pending_.size());
                            prefix_.clear();
                            state_ = State::text;
                            continue;
                        }
                    }
                }
                const size_t at = pending_.find(kHermesClose);
                if (at == std::string::npos && !final) return;
                const std::string_view body = std::string_view(pending_).substr(0, at);
                if (!take_json(out, body.substr(skip_space(body)))) {
                    emit_text(out, prefix_);
                    emit_text(out, body);
                    if (at != std::string::npos) emit_text(out, kHermesClose);
                }
                pending_.erase(0, at == std::string::npos ? pending_.size() : at + kHermesClose.size());
                prefix_.clear();
                state_ = State::text;
                continue;
            }
            case State::json: {
                const size_t j = skip_space(pending_);
                size_t end = std::string::npos;
                bool ok = false;
                if (j < pending_.size() && (pending_[j] == '{' || pending_[j] == '[')) {
                    end = json_value_end(std::string_view(pending_).substr(j));
                    if (end == std::string::npos && !final) return;  // still open
                    if (end != std::string::npos && end != 0) {
                        end += j;
                        ok = take_json(out, std::string_view(pending_).substr(j, end - j));
                    }
                } else if (j == pending_.size() && !final) {
                    return;
                }
                if (!ok) {  // not a call: what opened it is content, the rest is read as text again
                    emit_text(out, prefix_);
                    prefix_.clear();
                    state_ = State::text;
                    continue;
                }
                pending_.erase(0, end);
                prefix_.clear();
                state_ = format_ == ToolCallFormat::llama3_json ? State::between : State::text;
                continue;
            }
            case State::between: {  // llama3_json: another ';'-separated call, or content
                const size_t j = skip_space(pending_);
                if (j == pending_.size()) {
                    if (final) {
                        state_ = State::text;
                        continue;
                    }
                    return;
                }
                if (pending_[j] == ';') {
                    prefix_ = pending_.substr(0, j + 1);
                    pending_.erase(0, j + 1);
                    state_ = State::json;
                    continue;
                }
                state_ = State::text;
                continue;
            }
        }
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

ToolCallParts parse_tool_calls(std::string_view text, ToolCallFormat format) {
    ToolCallParser parser(format);
    ToolCallParts a = parser.feed(text);
    ToolCallParts b = parser.finish();
    a.content += b.content;
    for (auto& c : b.calls) a.calls.push_back(std::move(c));
    return a;
}

}  // namespace pagoda::chat
