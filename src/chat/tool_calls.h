// Tool calls out of a model's output, for the formats of chat/tool_call_format.h. ToolCallParser is
// streaming: feed it the output (after any reasoning was split off) in pieces cut anywhere; it
// returns the content that is certainly not part of a call, and the calls as deltas: a call's first
// delta carries its index and name (sent once the name is known), later ones pieces of its
// `arguments` text as they are generated. Text that could still become a call — a partial marker, a
// call whose name is not known yet — is held back until decided; finish() decides the rest. Whatever
// the cuts, the concatenated results equal parse_tool_calls() of the whole text, and a call's
// concatenated argument pieces equal its arguments there, byte for byte.
//   hermes / qwen3_coder: <tool_call> then a JSON call object, or Qwen3-Coder's
//                <function=NAME><parameter=P>VALUE</parameter>…</function>, then </tool_call>;
//                anywhere, any number of them (a call not closed at the end is still taken).
//   mistral:     [TOOL_CALLS] then a JSON array of call objects (or one object), anywhere; at the
//                start of the output the marker may be missing (a control token decoding drops).
//   llama3_json: at the start of the output (after white space, an optional <|python_tag|>), a JSON
//                call object; more may follow separated by ';'.
//   deepseek_v3: <｜tool▁calls▁begin｜> then calls <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n
//                {…}\n```<｜tool▁call▁end｜> (V3.1's NAME<｜tool▁sep｜>{…} too), then <｜tool▁calls▁end｜>.
//   harmony:     a message whose header (from <|start|> or <|channel|> to <|message|>) names
//                to=functions.NAME; its body up to <|call|> (or the end) is the arguments. Other
//                messages stay content as written (the control-token markers appear only when the
//                detokenizer renders them, or when a grammar forced them as text).
//   minimax_m2:  <minimax:tool_call> then calls <invoke name="NAME"><parameter name="P">VALUE</parameter>…
//                </invoke>, then </minimax:tool_call>; anywhere, any number of blocks (MiniMax-M2). Values
//                typed as Qwen3-Coder's, without the white space at either end.
//   gemma4:      <|tool_call>call:NAME{arguments}<tool_call|>, anywhere, any number of them; the
//                arguments in Gemma 4's notation become JSON (chat/tool_call_gemma4.h). A syntax error
//                ends the call there, and what follows up to <tool_call|> is content.
// A JSON call object is {"name", "arguments"|"parameters": object | JSON text as a string | null}; a
// call is decided once its name is known and its arguments object began: from then on it is a call
// whatever follows (a cut-off call keeps the arguments it got). Arguments objects are passed on
// with the white space outside strings dropped. Qwen3-Coder values become a compact JSON object in
// parameter order: a parameter whose schema type (from `tools`, OpenAI's shape) is not "string"
// is taken as JSON when it parses, everything else is a JSON string (one newline trimmed at each
// end). What looks like a call but is not one is content, byte for byte. White space next to calls
// is dropped from the content. Never throws.
#pragma once
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chat/tool_call_format.h"
#include "chat/tool_call_gemma4.h"
#include "chat/tool_call_json.h"

namespace pagoda::chat {

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON text of the arguments object
};

struct ToolCallDelta {
    size_t index = 0;       // the call's position in the output, from 0
    std::string name;       // set on the call's first delta only
    std::string arguments;  // the next piece of the arguments text (may be empty)
    size_t content_offset = 0;  // how much of the same ToolCallParts' content came before it
};

struct ToolCallParts {
    std::string content;
    std::vector<ToolCallDelta> calls;
};

struct ParsedToolCalls {
    std::string content;
    std::vector<ToolCall> calls;
};

// Adds deltas to whole calls (a delta with a name starts a call).
void collect_tool_calls(std::vector<ToolCall>& calls, const std::vector<ToolCallDelta>& deltas);

class ToolCallParser {
public:
    // `tools`: the request's tools array (types Qwen3-Coder parameter values); null or empty: none.
    explicit ToolCallParser(ToolCallFormat format);
    ToolCallParser(ToolCallFormat format, const nlohmann::json& tools);
    ToolCallParts feed(std::string_view text);
    ToolCallParts finish();
    size_t calls_seen() const { return calls_; }

private:
    enum class State {
        start, text,
        json_call, hermes_open, hermes_close, llama3_between, mistral_list, mistral_next,
        xml_block, xml_name, xml_params, xml_param_name, xml_value,
        ds_calls, ds_header, ds_name, ds_fence, ds_args, ds_end,
        harmony_header, harmony_args, harmony_end, object_args,
        gemma4_header, gemma4_args, gemma4_end,
    };
    enum class Container { none, hermes, llama3, mistral_list, mistral_single, minimax };

    void run(ToolCallParts& out, bool final);
    bool step_text(ToolCallParts& out, bool final);
    bool step_json(ToolCallParts& out, bool final);
    bool step_xml(ToolCallParts& out, bool final);
    bool step_deepseek(ToolCallParts& out, bool final);
    bool step_harmony(ToolCallParts& out, bool final);
    bool step_object_args(ToolCallParts& out, bool final);
    bool step_gemma4(ToolCallParts& out, bool final);
    bool start_object_args(ToolCallParts& out, bool final, State after);

    void emit_text(ToolCallParts& out, std::string_view text);
    void give_back(ToolCallParts& out);  // the undecided text (raw_) is content after all
    void begin_call(ToolCallParts& out, std::string name);
    void add_arguments(ToolCallParts& out, std::string_view piece);
    void end_call();
    void to_text();     // a call or list of them ended: back to running text
    void start_json();  // a JSON call object starts
    void consume(size_t n);  // drops n bytes of pending_ (into raw_ while no call is open)
    void start_xml_value(ToolCallParts& out, std::string param);
    void end_xml_value(ToolCallParts& out, std::string_view last);

    ToolCallFormat format_;
    std::map<std::string, std::set<std::string>> typed_params_;  // function -> parameters not of type string
    State state_ = State::start;
    Container container_ = Container::none;
    State after_args_ = State::text;  // where object_args goes once the arguments object closed
    std::string pending_;   // undecided text
    std::string raw_;       // what opened the call being read (content again if it is not one)
    std::string held_ws_;   // trailing white space of the content, dropped if a call follows
    bool after_call_ = false;
    bool in_call_ = false;  // a call was begun and not ended
    size_t calls_ = 0;
    JsonCallReader reader_;
    size_t reader_sent_ = 0;  // arguments bytes of reader_ already passed on
    bool reader_begun_ = false;
    JsonMinifier minifier_;
    Gemma4ArgsReader gemma4_;
    std::string name_;        // xml / deepseek: the call's name as read
    std::set<std::string> typed_;  // xml: this call's typed parameters
    size_t xml_params_ = 0;
    bool value_typed_ = false, value_started_ = false;
    std::string value_;       // xml: a typed value so far
};

ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format);
ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format, const nlohmann::json& tools);

}  // namespace pagoda::chat
