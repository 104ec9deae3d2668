#include "chat/tool_call_gemma4.h"

#include <nlohmann/json.hpp>

#include "chat/text_scan.h"
#include "chat/tool_call_json.h"

namespace pagoda::chat {
namespace {

constexpr size_t kMaxDepth = 128;   // deeper nesting stops the reader (bounded work per byte)
constexpr size_t kMaxToken = 1024;  // a longer key or bare value is not one

std::string_view trim(std::string_view s) {
    s.remove_prefix(skip_space(s));
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// A bare value as JSON: the literals and JSON numbers as written, anything else a string.
std::string bare_json(std::string_view text) {
    const std::string_view t = trim(text);
    if (t == "true" || t == "false" || t == "null") return std::string(t);
    const auto v = nlohmann::json::parse(t, nullptr, false);
    if (!v.is_discarded() && v.is_number()) return std::string(t);
    return json_quote(t);
}

// Whether `rest` starts with the <|"|> marker (1), could still once more text comes (0), or not (-1).
int quote_at(std::string_view rest, bool final) {
    if (starts_with(rest, kGemma4Quote)) return 1;
    if (!final && rest.size() < kGemma4Quote.size() && starts_with(kGemma4Quote, rest)) return 0;
    return -1;
}

}  // namespace

void Gemma4ArgsReader::open(char bracket, std::string& out) {
    out += bracket;
    stack_.push_back(bracket);
    owed_comma_ = false;
    state_ = bracket == '{' ? State::key_or_end : State::value;
}

void Gemma4ArgsReader::close(std::string& out) {
    out += stack_.back() == '{' ? '}' : ']';
    stack_.pop_back();
    state_ = stack_.empty() ? State::done : State::after_value;
}

void Gemma4ArgsReader::comma(std::string& out) {
    if (owed_comma_) out += ',';
    owed_comma_ = false;
}

bool Gemma4ArgsReader::emit_key(std::string& out) {
    if (token_.empty()) return false;
    comma(out);
    out += json_quote(token_);
    out += ':';
    token_.clear();
    return true;
}

size_t Gemma4ArgsReader::read(std::string_view text, bool final, std::string& out) {
    size_t i = 0;
    auto element = [&] {  // a value starts: in an array it is an element and owes its comma
        if (stack_.back() == '[') comma(out);
    };
    while (i < text.size() && state_ != State::done && state_ != State::stopped) {
        const char c = text[i];
        const std::string_view rest = text.substr(i);
        switch (state_) {
            case State::open:
                if (c != '{') {
                    state_ = State::stopped;
                    break;
                }
                open(c, out);
                ++i;
                break;
            case State::key_or_end:
                if (is_space(c)) {
                    ++i;
                } else if (c == '}') {
                    close(out);
                    ++i;
                } else if (c == '"') {
                    token_.assign(1, '"');
                    escaped_ = false;
                    state_ = State::json_key;
                    ++i;
                } else if (c == '<') {
                    const int q = quote_at(rest, final);
                    if (q == 0) return i;
                    if (q < 0) {
                        state_ = State::stopped;
                        break;
                    }
                    token_.clear();
                    state_ = State::quoted_key;
                    i += kGemma4Quote.size();
                } else if (c == ',' || c == ':' || c == '{' || c == '[' || c == ']') {
                    state_ = State::stopped;
                } else {
                    token_.assign(1, c);
                    state_ = State::bare_key;
                    ++i;
                }
                break;
            case State::bare_key:
                if (c == ':') {
                    token_ = std::string(trim(token_));
                    if (!emit_key(out)) {
                        state_ = State::stopped;
                        break;
                    }
                    state_ = State::value;
                    ++i;
                } else if (c == ',' || c == '{' || c == '}' || c == '[' || c == ']' || c == '<' || c == '"' || c == '\n' ||
                           token_.size() >= kMaxToken) {
                    state_ = State::stopped;
                } else {
                    token_ += c;
                    ++i;
                }
                break;
            case State::quoted_key: {
                const size_t p = rest.find(kGemma4Quote);
                const size_t take = p != std::string_view::npos ? p : rest.size() - (final ? 0 : partial_tag_suffix(rest, kGemma4Quote));
                token_.append(rest.substr(0, take));
                if (token_.size() > kMaxToken) {
                    state_ = State::stopped;
                    break;
                }
                if (p == std::string_view::npos) return i + take;
                i += p + kGemma4Quote.size();
                state_ = State::colon;
                break;
            }
            case State::json_key:
                token_ += c;
                ++i;
                if (token_.size() > kMaxToken) {
                    state_ = State::stopped;
                } else if (escaped_) {
                    escaped_ = false;
                } else if (c == '\\') {
                    escaped_ = true;
                } else if (c == '"') {
                    const auto v = nlohmann::json::parse(token_, nullptr, false);
                    if (v.is_discarded() || !v.is_string()) {
                        state_ = State::stopped;
                        break;
                    }
                    token_ = v.get<std::string>();
                    state_ = State::colon;
                }
                break;
            case State::colon:
                if (is_space(c)) {
                    ++i;
                } else if (c == ':' && emit_key(out)) {
                    state_ = State::value;
                    ++i;
                } else {
                    state_ = State::stopped;
                }
                break;
            case State::value:
                if (is_space(c)) {
                    ++i;
                } else if (c == '<' && quote_at(rest, final) >= 0) {
                    if (quote_at(rest, final) == 0) return i;
                    element();
                    out += '"';
                    state_ = State::gemma_string;
                    i += kGemma4Quote.size();
                } else if (c == '"') {
                    element();
                    out += '"';
                    escaped_ = false;
                    state_ = State::json_string;
                    ++i;
                } else if (c == '{' || c == '[') {
                    if (stack_.size() >= kMaxDepth) {
                        state_ = State::stopped;
                        break;
                    }
                    element();
                    open(c, out);
                    ++i;
                } else if (c == ']' && stack_.back() == '[') {  // an empty array, or a trailing comma
                    close(out);
                    ++i;
                } else if (c == ',' || c == '}' || c == ']') {
                    state_ = State::stopped;
                } else {
                    token_.assign(1, c);
                    state_ = State::bare_value;
                    ++i;
                }
                break;
            case State::gemma_string: {
                const size_t p = rest.find(kGemma4Quote);
                const size_t take = p != std::string_view::npos ? p : rest.size() - (final ? 0 : partial_tag_suffix(rest, kGemma4Quote));
                json_escape(out, rest.substr(0, take));
                if (p == std::string_view::npos) return i + take;
                out += '"';
                i += p + kGemma4Quote.size();
                state_ = State::after_value;
                break;
            }
            case State::json_string:
                if (escaped_) {
                    out += c;
                    escaped_ = false;
                } else if (c == '\\') {
                    out += c;
                    escaped_ = true;
                } else if (c == '"') {
                    out += '"';
                    state_ = State::after_value;
                } else {
                    json_escape(out, std::string_view(&c, 1));  // a raw control character becomes an escape
                }
                ++i;
                break;
            case State::bare_value:
                // A bare value ends at a separator, a closing bracket or a marker (never part of a number).
                if (c == ',' || c == '}' || c == ']' || c == '<') {
                    element();
                    out += bare_json(token_);
                    token_.clear();
                    state_ = State::after_value;
                } else if (token_.size() >= kMaxToken) {
                    state_ = State::stopped;
                } else {
                    token_ += c;
                    ++i;
                }
                break;
            case State::after_value:
                if (is_space(c)) {
                    ++i;
                } else if (c == ',') {
                    owed_comma_ = true;
                    state_ = stack_.back() == '{' ? State::key_or_end : State::value;
                    ++i;
                } else if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
                    close(out);
                    ++i;
                } else {
                    state_ = State::stopped;
                }
                break;
            case State::done:
            case State::stopped: break;
        }
    }
    if (final && state_ == State::bare_value) {  // the output ended on a bare value: take it as it is
        element();
        out += bare_json(token_);
        token_.clear();
        state_ = State::after_value;
    }
    return i;
}

}  // namespace pagoda::chat
