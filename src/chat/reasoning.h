// Reasoning separation for models that think in <think>…</think> (Qwen3, DeepSeek-R1 distills):
// the text between the tags is reasoning, the rest is content. ReasoningSplitter is streaming: feed
// it the output as it arrives, in pieces cut anywhere (even inside a tag; a piece that ends on a whole UTF-8 character
// gives outputs that do too, as the tags are ASCII), and
// it returns the new reasoning and content; text that could still be the start of a tag is held back
// until the next piece decides it (finish() releases it). Whatever the cut, the concatenated
// results equal split_reasoning() of the whole text.
//   - <think> opens reasoning only at the start of the output (after white space); later it is content.
//   - Without an opening tag the splitter can start inside reasoning (start_in_reasoning): a template
//     whose generation prompt already ends with <think> (DeepSeek-R1) makes the model's output start
//     with the thinking itself.
//   - </think> closes reasoning (once); white space right after it is dropped from the content.
//   - Output that ends inside the reasoning (no </think>, e.g. cut by max_tokens) is all reasoning.
// Never throws; every input is valid. With ReasoningFormat::harmony the splitter is gpt-oss's
// (chat/harmony.h): the analysis channel is reasoning, the other messages content. With
// ReasoningFormat::gemma4 the tags are Gemma 4's <|channel> and <channel|>, the same rules, and the
// channel's name line right after the opening tag ("thought\n") is not part of the reasoning.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "chat/harmony.h"
#include "chat/reasoning_parts.h"

namespace pagoda::chat {

enum class ReasoningFormat { none, deepseek, harmony, gemma4 };
// "none" | "deepseek" | "harmony" | "gemma4"; throws pagoda::Error naming the choices otherwise.
ReasoningFormat parse_reasoning_format(std::string_view name);

// How a template's model thinks: harmony when its source has <|channel|> and <|message|> (gpt-oss),
// gemma4 when it has <|channel> and <channel|> (Gemma 4), deepseek when it mentions <think>, else none.
ReasoningFormat template_reasoning_format(std::string_view template_source);
// A template "thinks" when template_reasoning_format() is not none.
bool template_thinks(std::string_view template_source);
// True when a rendered prompt ends (ignoring trailing white space) with an opening <think>.
bool prompt_opens_thinking(std::string_view prompt);

class ReasoningSplitter {
public:
    explicit ReasoningSplitter(bool start_in_reasoning = false);
    // deepseek (or none): the <think> splitter above; gemma4: the same with Gemma 4's tags; harmony:
    // gpt-oss's (start_in_reasoning unused).
    ReasoningSplitter(ReasoningFormat format, bool start_in_reasoning);
    ReasoningParts feed(std::string_view text);
    ReasoningParts finish();  // releases what is held back
    bool in_reasoning() const { return harmony_ ? harmony_->in_reasoning() : state_ == State::reasoning; }

private:
    enum class State { start, label, reasoning, after_close, content };
    void step(ReasoningParts& out, bool final);

    State state_;
    std::string pending_;  // undecided text
    std::string_view open_ = "<think>", close_ = "</think>", label_;  // label_: dropped right after open_
    std::optional<HarmonySplitter> harmony_;
};

ReasoningParts split_reasoning(std::string_view text, bool start_in_reasoning = false);

}  // namespace pagoda::chat
