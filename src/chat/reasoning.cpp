#include "chat/reasoning.h"

#include "chat/text_scan.h"
#include "core/error.h"

namespace pagoda::chat {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kGemma4Open = "<|channel>";
constexpr std::string_view kGemma4Close = "<channel|>";
constexpr std::string_view kGemma4Label = "thought\n";  // the channel's name, as Gemma 4 writes it

}  // namespace

ReasoningFormat parse_reasoning_format(std::string_view name) {
    if (name == "none") return ReasoningFormat::none;
    if (name == "deepseek") return ReasoningFormat::deepseek;
    if (name == "harmony") return ReasoningFormat::harmony;
    if (name == "gemma4") return ReasoningFormat::gemma4;
    fail("unknown reasoning format '{}': use none, deepseek, harmony or gemma4", name);
}

ReasoningFormat template_reasoning_format(std::string_view source) {
    auto has = [&](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
    if (has("<|channel|>") && has("<|message|>")) return ReasoningFormat::harmony;
    if (has(kGemma4Open) && has(kGemma4Close)) return ReasoningFormat::gemma4;
    if (has(kOpen)) return ReasoningFormat::deepseek;
    return ReasoningFormat::none;
}

bool template_thinks(std::string_view source) { return template_reasoning_format(source) != ReasoningFormat::none; }

bool prompt_opens_thinking(std::string_view prompt) {
    size_t end = prompt.size();
    while (end > 0 && is_space(prompt[end - 1])) --end;
    return end >= kOpen.size() && prompt.substr(end - kOpen.size(), kOpen.size()) == kOpen;
}

ReasoningSplitter::ReasoningSplitter(bool start_in_reasoning)
    : state_(start_in_reasoning ? State::reasoning : State::start) {}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat format, bool start_in_reasoning)
    : ReasoningSplitter(start_in_reasoning) {
    if (format == ReasoningFormat::harmony) harmony_.emplace();
    if (format == ReasoningFormat::gemma4) open_ = kGemma4Open, close_ = kGemma4Close, label_ = kGemma4Label;
}

void ReasoningSplitter::step(ReasoningParts& out, bool final) {
    for (;;) {
        switch (state_) {
            case State::start: {
                const size_t i = skip_space(pending_);
                const std::string_view rest = std::string_view(pending_).substr(i);
                if (rest.size() >= open_.size() && rest.substr(0, open_.size()) == open_) {
                    pending_.erase(0, i + open_.size());
                    state_ = State::label;
                    continue;
                }
                if (!final && open_.substr(0, rest.size()) == rest) return;  // maybe the tag still
                state_ = State::content;
                continue;
            }
            case State::label: {  // the channel's name line (gemma4), dropped where it is the expected one
                if (starts_with(pending_, label_)) {
                    pending_.erase(0, label_.size());
                } else if (!final && starts_with(label_, pending_)) {
                    return;  // maybe the label still
                }
                state_ = State::reasoning;
                continue;
            }
            case State::reasoning: {
                const size_t at = pending_.find(close_);
                if (at != std::string::npos) {
                    out.reasoning.append(pending_, 0, at);
                    pending_.erase(0, at + close_.size());
                    state_ = State::after_close;
                    continue;
                }
                const size_t hold = final ? 0 : partial_tag_suffix(pending_, close_);
                out.reasoning.append(pending_, 0, pending_.size() - hold);
                pending_.erase(0, pending_.size() - hold);
                return;
            }
            case State::after_close: {
                const size_t i = skip_space(pending_);
                pending_.erase(0, i);
                if (pending_.empty()) return;
                state_ = State::content;
                continue;
            }
            case State::content:
                out.content += pending_;
                pending_.clear();
                return;
        }
    }
}

ReasoningParts ReasoningSplitter::feed(std::string_view text) {
    if (harmony_) return harmony_->feed(text);
    ReasoningParts out;
    pending_.append(text);
    step(out, false);
    return out;
}

ReasoningParts ReasoningSplitter::finish() {
    if (harmony_) return harmony_->finish();
    ReasoningParts out;
    step(out, true);
    return out;
}

ReasoningParts split_reasoning(std::string_view text, bool start_in_reasoning) {
    ReasoningSplitter s(start_in_reasoning);
    return split_whole(s, text);
}

}  // namespace pagoda::chat
