// ToolCallParser's states for the formats whose calls are framed by marker texts rather than by a
// JSON object: Qwen3-Coder's XML (inside <tool_call>) and MiniMax-M2's (inside <minimax:tool_call>),
// DeepSeek V3's and harmony's; and the
// arguments object that DeepSeek and harmony calls carry (streamed minified by object_args).
#include <array>

#include <nlohmann/json.hpp>

#include "chat/text_scan.h"
#include "chat/tool_calls.h"
#include "chat/tool_calls_markers.h"

namespace pagoda::chat {
namespace {

constexpr size_t kMaxName = 256;       // a longer function or parameter name is not one
constexpr size_t kMaxHeader = 512;     // a harmony header longer than this is not a call's
constexpr int kMaxValueDepth = 128;    // a deeper Qwen3-Coder value stays a string (bounded parse)
constexpr size_t kMaxFenceLine = 16;   // DeepSeek's ```json line, newline included

bool plain_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxName) return false;
    for (char c : name)
        if (c == '<' || c == '>' || c == '\n' || c == '\r') return false;
    return true;
}

std::string trimmed(std::string_view s) {
    const size_t b = skip_space(s);
    size_t e = s.size();
    while (e > b && is_space(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
}

// A call's or parameter's name as written, MiniMax-M2's quotes ("NAME" or 'NAME') removed.
std::string xml_name_text(std::string_view raw, bool quoted) {
    std::string name = trimmed(raw);
    if (quoted && name.size() >= 2 && (name.front() == '"' || name.front() == '\'') && name.back() == name.front())
        name = name.substr(1, name.size() - 2);
    return name;
}

// What ends a parameter's value: its closing tag, or (a value left open) the next parameter, the
// call's end or the block's.
std::array<std::string_view, 4> value_ends(const XmlSyntax& x) {
    return {kParameterClose, x.param_open, x.call_close, x.block_close};
}

// A Qwen3-Coder or MiniMax-M2 value of a parameter typed other than string: its JSON when it parses, else a string.
std::string typed_value(const std::string& text) {
    const std::string t = trimmed(text);
    int depth = 0, deepest = 0;
    for (char c : t) {
        if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
        else if (c == '}' || c == ']') --depth;
    }
    if (!t.empty() && deepest <= kMaxValueDepth) {
        const auto v = nlohmann::ordered_json::parse(t, nullptr, false);
        if (!v.is_discarded()) {
            try {
                return v.dump();
            } catch (const nlohmann::ordered_json::exception&) {
            }
        }
    }
    return json_quote(text);
}

}  // namespace

void ToolCallParser::start_xml_value(ToolCallParts& out, std::string param) {
    std::string head = xml_params_++ ? "," : "{";  // compact, as the JSON formats' arguments
    head += json_quote(param);
    head += ':';
    value_typed_ = typed_.count(param) > 0;
    if (!value_typed_) head += '"';
    add_arguments(out, head);
    value_.clear();
    value_started_ = false;
    state_ = State::xml_value;
}

void ToolCallParser::end_xml_value(ToolCallParts& out, std::string_view last) {
    if (value_typed_) {
        value_.append(last);
        add_arguments(out, typed_value(value_));
    } else {
        std::string piece;
        json_escape(piece, last);
        piece += '"';
        add_arguments(out, piece);
    }
    value_.clear();
    state_ = State::xml_params;
}

bool ToolCallParser::step_xml(ToolCallParts& out, bool final) {
    const XmlSyntax& x = xml_syntax(format_);
    switch (state_) {
        case State::xml_block: {  // MiniMax-M2: inside <minimax:tool_call>, before a call or the block's end
            const size_t j = skip_space(pending_);
            const std::string_view rest = std::string_view(pending_).substr(j);
            const bool opened = container_ == Container::minimax;  // a call of this block was read
            if (rest.empty() && !final) return false;
            const Match call = match(rest, x.call_open, final), end = match(rest, x.block_close, final);
            if (call == Match::partial || end == Match::partial) return false;
            if (call == Match::yes) {
                consume(j + x.call_open.size());
                state_ = State::xml_name;
            } else if (end == Match::yes && opened) {
                consume(j + x.block_close.size());
                to_text();
            } else if (opened) {
                to_text();  // what follows the block's calls is content
            } else {
                give_back(out);  // a block without a call is content as written
            }
            return true;
        }
        case State::xml_name: {
            const size_t gt = pending_.find('>');
            if (gt == std::string::npos) {
                if (!final && pending_.size() <= kMaxName && plain_name(pending_ + "x")) return false;
                give_back(out);
                return true;
            }
            const std::string name = xml_name_text(std::string_view(pending_).substr(0, gt), x.minimax);
            if (!plain_name(std::string_view(pending_).substr(0, gt)) || name.empty()) {
                give_back(out);
                return true;
            }
            consume(gt + 1);
            begin_call(out, name);
            if (x.minimax) container_ = Container::minimax;
            const auto typed = typed_params_.find(name);
            typed_ = typed == typed_params_.end() ? std::set<std::string>() : typed->second;
            xml_params_ = 0;
            state_ = State::xml_params;
            return true;
        }
        case State::xml_params: {
            const size_t j = skip_space(pending_);
            const std::string_view rest = std::string_view(pending_).substr(j);
            auto close_call = [&](size_t marker_size) {
                consume(j + marker_size);
                add_arguments(out, xml_params_ ? "}" : "{}");
                end_call();
            };
            if (rest.empty()) {
                if (!final) return false;
                close_call(0);
                to_text();
                return true;
            }
            bool partial = false;
            for (std::string_view m : {x.param_open, x.call_close, x.block_close}) {
                const Match r = match(rest, m, final);
                partial = partial || r == Match::partial;
                if (r != Match::yes) continue;
                if (m == x.param_open) {
                    consume(j + m.size());
                    state_ = State::xml_param_name;
                } else if (m == x.call_close) {
                    close_call(m.size());
                    if (x.minimax) {
                        state_ = State::xml_block;  // another call, or the block's end
                    } else {
                        container_ = Container::hermes;
                        state_ = State::hermes_close;
                    }
                } else {
                    close_call(m.size());
                    to_text();
                }
                return true;
            }
            if (partial) return false;
            // Anything else inside a call is dropped, up to the next tag.
            const size_t lt = rest.find('<', 1);
            consume(j + (lt == std::string_view::npos ? rest.size() : lt));
            return true;
        }
        case State::xml_param_name: {
            // Decided on the first kMaxName + 1 bytes only, so that any cut decides the same.
            const size_t gt = pending_.find('>');
            if (gt == std::string::npos || gt > kMaxName) {
                if (gt == std::string::npos && !final && pending_.size() <= kMaxName) return false;
                state_ = State::xml_params;  // not a parameter: what follows is dropped as junk
                return true;
            }
            const std::string param = xml_name_text(std::string_view(pending_).substr(0, gt), x.minimax);
            consume(gt + 1);
            if (plain_name(param)) start_xml_value(out, param);
            else state_ = State::xml_params;
            return true;
        }
        case State::xml_value: {
            // The white space at a value's ends that is not part of it: Qwen3-Coder's one newline,
            // MiniMax-M2's all of it. Trailing white space is held back until what follows decides.
            if (!value_started_) {
                if (x.minimax) {
                    consume(skip_space(pending_));  // dropped whatever follows
                    if (pending_.empty() && !final) return false;
                } else {
                    if (pending_.empty() && !final) return false;
                    if (!pending_.empty() && pending_[0] == '\n') consume(1);
                }
                value_started_ = true;
            }
            auto trailing = [&](std::string_view v) {
                size_t n = v.size();
                if (x.minimax) {
                    while (n > 0 && is_space(v[n - 1])) --n;
                } else if (n > 0 && v[n - 1] == '\n') {
                    --n;
                }
                return n;
            };
            size_t at = std::string::npos;
            std::string_view end;
            for (std::string_view m : value_ends(x))
                if (const size_t p = pending_.find(m); p < at) at = p, end = m;
            if (at != std::string::npos || final) {
                std::string_view value = std::string_view(pending_).substr(0, std::min(at, pending_.size()));
                value = value.substr(0, trailing(value));
                end_xml_value(out, value);
                consume(at == std::string::npos ? pending_.size() : at + (end == kParameterClose ? end.size() : 0));
                return true;
            }
            size_t hold = 0;
            for (std::string_view m : value_ends(x)) hold = std::max(hold, partial_tag_suffix(pending_, m));
            const size_t n = trailing(std::string_view(pending_).substr(0, pending_.size() - hold));
            if (value_typed_) value_.append(pending_, 0, n);
            else {
                std::string piece;
                json_escape(piece, std::string_view(pending_).substr(0, n));
                add_arguments(out, piece);
            }
            consume(n);
            return false;
        }
        default: return false;
    }
}

bool ToolCallParser::step_object_args(ToolCallParts& out, bool final) {
    std::string piece;
    size_t i = 0;
    while (i < pending_.size() && !minifier_.done()) minifier_.put(pending_[i++], piece);
    consume(i);
    add_arguments(out, piece);
    if (minifier_.done()) {
        state_ = after_args_;
        return true;
    }
    if (!final) return false;
    end_call();  // cut off inside the arguments
    to_text();
    return true;
}

// After a call's header: its arguments object (streamed), or no arguments ("{}") when something else follows.
bool ToolCallParser::start_object_args(ToolCallParts& out, bool final, State after) {
    const size_t j = skip_space(pending_);
    if (j == pending_.size() && !final) return false;
    if (j < pending_.size() && pending_[j] == '{') {
        consume(j);
        minifier_ = JsonMinifier();
        after_args_ = after;
        state_ = State::object_args;
        return true;
    }
    add_arguments(out, "{}");
    state_ = after;
    return true;
}

bool ToolCallParser::step_deepseek(ToolCallParts& out, bool final) {
    const size_t j = skip_space(pending_);
    const std::string_view rest = std::string_view(pending_).substr(j);
    switch (state_) {
        case State::ds_calls: {
            if (rest.empty() && !final) return false;
            const Match call = match(rest, kDsCallBegin, final), end = match(rest, kDsCallsEnd, final);
            if (call == Match::yes) {
                consume(j + kDsCallBegin.size());
                state_ = State::ds_header;
            } else if (end == Match::yes) {
                consume(j + kDsCallsEnd.size());
                to_text();
            } else if (call == Match::partial || end == Match::partial) {
                return false;
            } else {
                give_back(out);
            }
            return true;
        }
        case State::ds_header: {
            const size_t p = pending_.find(kDsSep);
            if (p == std::string::npos || p > kMaxName) {
                if (p == std::string::npos && !final && pending_.size() <= kMaxName + kDsSep.size()) return false;
                give_back(out);
                return true;
            }
            name_ = trimmed(std::string_view(pending_).substr(0, p));
            consume(p + kDsSep.size());
            state_ = State::ds_name;
            return true;
        }
        case State::ds_name: {
            if (pending_.empty() && !final) return false;
            if (!pending_.empty() && pending_[0] == '{') {  // V3.1: NAME<｜tool▁sep｜>{arguments}
                if (!plain_name(name_)) {
                    give_back(out);
                    return true;
                }
                begin_call(out, name_);
                return start_object_args(out, final, State::ds_end);
            }
            size_t nl = pending_.find('\n');
            if (nl > kMaxName) nl = std::string::npos;
            if (nl == std::string::npos && !final && pending_.size() <= kMaxName) return false;
            const std::string name = nl == std::string::npos ? std::string() : trimmed(std::string_view(pending_).substr(0, nl));
            if (!plain_name(name)) {
                give_back(out);
                return true;
            }
            consume(nl + 1);
            begin_call(out, name);
            state_ = State::ds_fence;
            return true;
        }
        case State::ds_fence: {
            if (starts_with(rest, kFence)) {  // ```json and its line
                size_t nl = rest.find('\n');
                if (nl >= kMaxFenceLine) nl = std::string_view::npos;  // a fence line is short: ```json
                if (nl == std::string_view::npos && !final && rest.size() < kMaxFenceLine) return false;
                consume(j + (nl == std::string_view::npos ? kFence.size() : nl + 1));
            } else if (match(rest, kFence, final) == Match::partial) {
                return false;
            }
            state_ = State::ds_args;
            return true;
        }
        case State::ds_args: return start_object_args(out, final, State::ds_end);
        case State::ds_end: {
            if (starts_with(rest, kFence)) {
                consume(j + kFence.size());
                return true;
            }
            if (rest.empty() && !final) return false;
            const Match end = match(rest, kDsCallEnd, final);
            if (end == Match::partial || match(rest, kFence, final) == Match::partial) return false;
            if (end == Match::yes) consume(j + kDsCallEnd.size());
            end_call();
            if (end == Match::yes) state_ = State::ds_calls;
            else to_text();
            return true;
        }
        default: return false;
    }
}

bool ToolCallParser::step_harmony(ToolCallParts& out, bool final) {
    switch (state_) {
        case State::harmony_header: {
            // Decided on the first kMaxHeader + <|message|> bytes only, so that any cut decides the same.
            const size_t p = pending_.find(kHarmonyMessage);
            const size_t start = pending_.find(kHarmonyStart);
            if (start < p || (p != std::string::npos && p > kMaxHeader)) {
                give_back(out);  // a new message first, or too long: not a call's header
                return true;
            }
            if (p == std::string::npos) {
                if (!final && pending_.size() < kMaxHeader + kHarmonyMessage.size()) return false;
                give_back(out);
                return true;
            }
            const std::string_view header = std::string_view(pending_).substr(0, p);
            const std::string full = raw_ + std::string(header);
            const size_t r = full.find(kHarmonyRecipient);
            size_t e = r == std::string::npos ? r : r + kHarmonyRecipient.size();
            while (e < full.size() && !is_space(full[e]) && full[e] != '<') ++e;
            const size_t from = r + kHarmonyRecipient.size();
            const std::string name = r == std::string::npos ? std::string() : full.substr(from, e - from);
            if (!plain_name(name)) {
                give_back(out);
                return true;
            }
            consume(p + kHarmonyMessage.size());
            begin_call(out, name);
            state_ = State::harmony_args;
            return true;
        }
        case State::harmony_args: return start_object_args(out, final, State::harmony_end);
        case State::harmony_end: {
            const size_t j = skip_space(pending_);
            const std::string_view rest = std::string_view(pending_).substr(j);
            if (rest.empty() && !final) return false;
            const Match m = match(rest, kHarmonyCall, final);
            if (m == Match::partial) return false;
            if (m == Match::yes) consume(j + kHarmonyCall.size());
            end_call();
            to_text();
            return true;
        }
        default: return false;
    }
}

}  // namespace pagoda::chat
