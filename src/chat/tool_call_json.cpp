#include "chat/tool_call_json.h"

#include <nlohmann/json.hpp>

#include "chat/text_scan.h"

namespace pagoda::chat {
namespace {

constexpr size_t kMaxNameBytes = 1024;  // a longer key or name is not a call's

// The decoded text of a JSON string token (quotes included); false when it is not one.
bool decode_string(const std::string& token, std::string& out) {
    const auto v = nlohmann::json::parse(token, nullptr, false);
    if (v.is_discarded() || !v.is_string()) return false;
    out = v.get<std::string>();
    return true;
}

bool is_scalar_byte(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '+' || c == '-';
}

}  // namespace

void json_escape(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    out += "\\u00";
                    out += kHex[c >> 4];
                    out += kHex[c & 15];
                } else {
                    out += ch;
                }
        }
    }
}

std::string json_quote(std::string_view text) {
    std::string out = "\"";
    json_escape(out, text);
    out += '"';
    return out;
}

void JsonMinifier::put(char c, std::string& out) {
    if (done_) return;
    if (in_string_) {
        out += c;
        if (escaped_) escaped_ = false;
        else if (c == '\\') escaped_ = true;
        else if (c == '"') in_string_ = false;
        return;
    }
    if (is_space(c)) return;
    out += c;
    if (c == '"') in_string_ = true;
    else if (c == '{' || c == '[') ++depth_;
    else if ((c == '}' || c == ']') && --depth_ <= 0) done_ = true;
}

bool JsonCallReader::decided() const {
    if (name_.empty()) return false;
    return args_kind_ == ArgsKind::object || args_done_ || state_ == State::closed;
}

JsonCallReader::Status JsonCallReader::close() {
    if (name_.empty()) return Status::invalid;
    if (args_kind_ == ArgsKind::none) {
        args_kind_ = ArgsKind::null;
        args_ = "{}";
    }
    state_ = State::closed;
    return Status::complete;
}

// A value ended: what it was for.
JsonCallReader::Status JsonCallReader::end_value() {
    state_ = State::after_value;
    if (target_ == Target::name) {
        if (!decode_string(token_, name_) || name_.empty()) {
            name_.clear();
            return Status::invalid;
        }
    } else if (target_ == Target::arguments && args_kind_ == ArgsKind::string) {
        if (!decode_string(token_, args_)) return fail();
        args_done_ = true;
    } else if (target_ == Target::arguments && args_kind_ == ArgsKind::null) {
        if (token_ != "null") return fail();
        args_ = "{}";
        args_done_ = true;
    }
    return Status::reading;
}

JsonCallReader::Status JsonCallReader::put(char c) {
    switch (state_) {
        case State::open:
            if (is_space(c)) return Status::reading;
            if (c != '{') return fail();
            state_ = State::key_or_end;
            return Status::reading;
        case State::key_or_end:
        case State::next_key:
            if (is_space(c)) return Status::reading;
            if (c == '}' && state_ == State::key_or_end) return close();
            if (c != '"') return fail();
            token_ = "\"";
            escaped_ = false;
            state_ = State::key;
            return Status::reading;
        case State::key:
            token_ += c;
            if (token_.size() > kMaxNameBytes) return fail();
            if (escaped_) escaped_ = false;
            else if (c == '\\') escaped_ = true;
            else if (c == '"') {
                if (!decode_string(token_, key_)) return fail();
                state_ = State::colon;
            }
            return Status::reading;
        case State::colon:
            if (is_space(c)) return Status::reading;
            if (c != ':') return fail();
            state_ = State::value;
            return Status::reading;
        case State::value: {
            if (is_space(c)) return Status::reading;
            target_ = Target::other;
            if (key_ == "name" && name_.empty()) target_ = Target::name;
            else if ((key_ == "arguments" || key_ == "parameters") && args_kind_ == ArgsKind::none) target_ = Target::arguments;
            token_.clear();
            escaped_ = false;
            if (c == '"') {
                if (target_ == Target::arguments) args_kind_ = ArgsKind::string;
                token_ = "\"";
                state_ = State::string_value;
                return Status::reading;
            }
            if (target_ == Target::name) return fail();  // a name that is not a string
            if (c == '{' || c == '[') {
                if (target_ == Target::arguments) {
                    if (c != '{') return fail();
                    args_kind_ = ArgsKind::object;
                    args_min_.put(c, args_);
                } else {
                    skip_min_ = JsonMinifier();
                    skip_min_.put(c, skipped_);
                }
                state_ = State::nested_value;
                return Status::reading;
            }
            if (!is_scalar_byte(c)) return fail();
            if (target_ == Target::arguments) {
                if (c != 'n') return fail();  // only null stands for no arguments
                args_kind_ = ArgsKind::null;
            }
            token_ = std::string(1, c);
            state_ = State::scalar_value;
            return Status::reading;
        }
        case State::string_value:
            if (target_ != Target::other) token_ += c;
            if (target_ == Target::name && token_.size() > kMaxNameBytes) return fail();
            if (escaped_) escaped_ = false;
            else if (c == '\\') escaped_ = true;
            else if (c == '"') return end_value();
            return Status::reading;
        case State::nested_value:
            if (target_ == Target::arguments) {
                args_min_.put(c, args_);
                if (args_min_.done()) state_ = State::after_value;
            } else {
                skipped_.clear();
                skip_min_.put(c, skipped_);
                if (skip_min_.done()) state_ = State::after_value;
            }
            return Status::reading;
        case State::scalar_value:
            if (is_scalar_byte(c)) {
                if (token_.size() > 64) return fail();
                token_ += c;
                return Status::reading;
            }
            if (Status s = end_value(); s != Status::reading) return s;
            return put(c);  // the byte after the scalar
        case State::after_value:
            if (is_space(c)) return Status::reading;
            if (c == ',') {
                state_ = State::next_key;
                return Status::reading;
            }
            if (c == '}') return close();
            return fail();
        case State::closed: return Status::stopped;
    }
    return fail();
}

}  // namespace pagoda::chat
