// gpt-oss's harmony output split into reasoning and content. The model answers in messages, each a
// header then a body: `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final
// <|message|>…` (the generation prompt ends with `<|start|>assistant`, so the first header starts
// the output). The markers reach the splitter as text (the vocabulary renders them: tokenizer/
// vocab.cpp). HarmonySplitter is streaming: feed it the output in pieces cut anywhere; whatever the
// cuts, the concatenated results equal split_harmony() of the whole text.
//   - analysis channel            -> reasoning (the body);
//   - final channel, commentary without a recipient (a preamble), any other channel -> content
//     (the body);
//   - a header naming a recipient (`to=functions.NAME`) -> content, re-written whole as
//     `<|start|>HEADER<|message|>BODY<|call|>`, the form the tool-call parser reads
//     (chat/tool_calls.h, format harmony);
//   - a body ends at <|end|>, <|return|>, <|call|> or the end of the output (a <|start|> inside it
//     is body text, as for the grammar of think-then-answer, whose block only <|end|> closes).
// Anything else degrades to content as written: an output that does not start with a header
// (plain text), text between messages, a header longer than 512 bytes or cut off by a new
// <|start|> or by the end. White space between messages is dropped. Never throws.
#pragma once
#include <string>
#include <string_view>

#include "chat/reasoning_parts.h"

namespace pagoda::chat {

class HarmonySplitter {
public:
    HarmonySplitter();
    ReasoningParts feed(std::string_view text);
    ReasoningParts finish();
    bool in_reasoning() const { return state_ == State::body && kind_ == Kind::reasoning; }

private:
    enum class State { first_header, header, body, between, plain };
    enum class Kind { reasoning, content, call };
    bool step(ReasoningParts& out, bool final);
    bool step_header(ReasoningParts& out, bool final);
    bool step_body(ReasoningParts& out, bool final);
    bool step_between(ReasoningParts& out, bool final);
    void start_body(std::string_view header);

    State state_ = State::first_header;
    Kind kind_ = Kind::content;
    std::string pending_;     // undecided text
    std::string opened_;      // header state: the marker that opened it ("<|start|>" or "")
    bool stray_ = false;      // between: text that is no message was seen (content up to <|start|>)
};

ReasoningParts split_harmony(std::string_view text);

}  // namespace pagoda::chat
