#include "chat/reasoning.h"

#include "chat/text_scan.h"
#include "core/error.h"

namespace pagoda::chat {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

ReasoningFormat parse_reasoning_format(std::string_view name) {
    if (name == "none") return ReasoningFormat::none;
    if (name == "deepseek") return ReasoningFormat::deepseek;
    if (name == "harmony") return ReasoningFormat::harmony;
    fail("unknown reasoning format '{}': use none, deepseek or harmony", name);
}

ReasoningFormat template_reasoning_format(std::string_view source) {
    auto has = [&](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
    if (has("<|channel|>") && has("<|message|>")) return ReasoningFormat::harmony;
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
}

void ReasoningSplitter::step(ReasoningParts& out, bool final) {
    for (;;) {
        switch (state_) {
            case State::start: {
                const size_t i = skip_space(pending_);
                const std::string_view rest = std::string_view(pending_).substr(i);
                if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
                    pending_.erase(0, i + kOpen.size());
                    state_ = State::reasoning;
                    continue;
                }
                if (!final && kOpen.substr(0, rest.size()) == rest) return;  // maybe the tag still
                state_ = State::content;
                continue;
            }
            case State::reasoning: {
                const size_t at = pending_.find(kClose);
                if (at != std::string::npos) {
                    out.reasoning.append(pending_, 0, at);
                    pending_.erase(0, at + kClose.size());
                    state_ = State::after_close;
                    continue;
                }
                const size_t hold = final ? 0 : partial_tag_suffix(pending_, kClose);
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
