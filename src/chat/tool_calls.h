// Tool calls out of a model's output, for the formats of chat/tool_call_format.h. ToolCallParser is
// streaming: feed it the output (after any reasoning was split off) in pieces cut anywhere; it
// returns the content that is certainly not part of a call and each call once it is complete (its
// JSON closed). Text that could still become a call — a partial marker, an unclosed call — is held
// back until decided; finish() decides the rest. Whatever the cuts, the concatenated results equal
// parse_tool_calls() of the whole text.
//   hermes:      <tool_call>{"name": "f", "arguments": {…}}</tool_call>, anywhere, any number of them
//                ("parameters" accepted for "arguments"; a call never closed is still taken at the end
//                when its JSON is whole).
//   mistral:     [TOOL_CALLS] then a JSON array of {"name", "arguments"} objects (or one object),
//                anywhere; at the start of the output the marker may be missing (it is a control
//                token that decoding drops).
//   llama3_json: at the start of the output (after white space, an optional <|python_tag|>), a JSON
//                object {"name", "parameters" | "arguments"}; more may follow separated by ';'.
// What looks like a call but is not one (bad JSON, no "name", arguments not an object or string) is
// content, byte for byte. White space next to calls is dropped from the content. Never throws.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_format.h"

namespace pagoda::chat {

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON text of the arguments object (as the model wrote it when a string)
};

struct ToolCallParts {
    std::string content;
    std::vector<ToolCall> calls;
};

class ToolCallParser {
public:
    explicit ToolCallParser(ToolCallFormat format) : format_(format) {}
    ToolCallParts feed(std::string_view text);
    ToolCallParts finish();
    size_t calls_seen() const { return calls_; }

private:
    enum class State { start, text, tag_body, json, between };
    void run(ToolCallParts& out, bool final);
    void emit_text(ToolCallParts& out, std::string_view text);
    void add_call(ToolCallParts& out, ToolCall call);
    bool take_json(ToolCallParts& out, std::string_view value);

    ToolCallFormat format_;
    State state_ = State::start;
    std::string pending_;  // undecided text
    std::string prefix_;   // what opened the call being read (restored as content if it is not one)
    std::string held_ws_;  // trailing white space of the content, dropped if a call follows
    bool after_call_ = false;
    size_t calls_ = 0;
};

ToolCallParts parse_tool_calls(std::string_view text, ToolCallFormat format);

}  // namespace pagoda::chat
