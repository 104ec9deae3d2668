#include "chat/harmony.h"

#include <array>

#include "chat/text_scan.h"

namespace pagoda::chat {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kRecipient = "to=";
constexpr size_t kMaxHeader = 512;  // a longer header is not one (decided on this many bytes only)

// What may open the first message's header: the generation prompt ended with the role.
constexpr std::array<std::string_view, 2> kFirstHeader = {kChannel, " to="};
// Not <|start|>: a message ends before the next starts, and a grammar's reasoning block
// (grammar/reasoning_prefix.h) is closed by <|end|> only, so the two agree on where a body ends.
constexpr std::array<std::string_view, 3> kBodyEnds = {kEnd, kReturn, kCall};

bool has_text(std::string_view s) { return skip_space(s) < s.size(); }

// The word after `key` in a header, up to white space or the next marker.
std::string_view word_after(std::string_view header, std::string_view key) {
    const size_t at = header.find(key);
    if (at == std::string_view::npos) return {};
    size_t from = at + key.size(), end = from;
    while (end < header.size() && !is_space(header[end]) && header[end] != '<') ++end;
    return header.substr(from, end - from);
}

}  // namespace

HarmonySplitter::HarmonySplitter() = default;

void HarmonySplitter::start_body(std::string_view header) {
    // Only a " to=" / "to=" at a word start is a recipient ("<|channel|>commentary to=functions.f").
    std::string_view recipient;
    for (size_t at = header.find(kRecipient); at != std::string_view::npos; at = header.find(kRecipient, at + 1)) {
        if (at == 0 || is_space(header[at - 1]) || header[at - 1] == '>') {
            recipient = word_after(header.substr(at), kRecipient);
            break;
        }
    }
    const std::string_view channel = word_after(header, kChannel);
    if (!recipient.empty()) kind_ = Kind::call;
    else if (channel == "analysis") kind_ = Kind::reasoning;
    else kind_ = Kind::content;
    state_ = State::body;
}

bool HarmonySplitter::step_header(ReasoningParts& out, bool final) {
    if (state_ == State::first_header) {
        for (std::string_view m : kFirstHeader) {
            if (starts_with(pending_, m)) {
                state_ = State::header;
                opened_.clear();
                return true;
            }
        }
        for (std::string_view m : kFirstHeader)
            if (!final && pending_.size() < m.size() && starts_with(m, pending_)) return false;
        state_ = State::plain;  // not harmony: the output is content as written
        return true;
    }
    const size_t p = pending_.find(kMessage);
    const size_t s = pending_.find(kStart);
    if (s != std::string::npos && s < p && s <= kMaxHeader) {  // a new message before this header ended
        out.content += opened_;
        out.content.append(pending_, 0, s);
        pending_.erase(0, s + kStart.size());
        opened_ = kStart;
        return true;
    }
    if (p != std::string::npos && p <= kMaxHeader) {
        const std::string header = pending_.substr(0, p);
        pending_.erase(0, p + kMessage.size());
        start_body(header);
        if (kind_ == Kind::call) {
            out.content += kStart;
            out.content += header;
            out.content += kMessage;
        }
        return true;
    }
    if (p == std::string::npos && !final && pending_.size() < kMaxHeader + kMessage.size()) return false;
    out.content += opened_;  // no header after all: its text is content (from here on as between messages)
    state_ = State::between;
    stray_ = true;
    return true;
}

bool HarmonySplitter::step_body(ReasoningParts& out, bool final) {
    std::string& target = kind_ == Kind::reasoning ? out.reasoning : out.content;
    size_t at = std::string::npos;
    std::string_view marker;
    for (std::string_view m : kBodyEnds)
        if (const size_t i = pending_.find(m); i < at) at = i, marker = m;
    if (at == std::string::npos) {
        size_t hold = 0;
        if (!final)
            for (std::string_view m : kBodyEnds) hold = std::max(hold, partial_tag_suffix(pending_, m));
        target.append(pending_, 0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return false;
    }
    target.append(pending_, 0, at);
    if (kind_ == Kind::call) out.content += kCall;
    pending_.erase(0, at + marker.size());
    state_ = State::between;
    stray_ = false;
    return true;
}

bool HarmonySplitter::step_between(ReasoningParts& out, bool final) {
    const size_t s = pending_.find(kStart);
    const size_t end = s != std::string::npos ? s : pending_.size() - (final ? 0 : partial_tag_suffix(pending_, kStart));
    const std::string_view seg = std::string_view(pending_).substr(0, end);
    if (!stray_ && has_text(seg)) stray_ = true;
    if (stray_) {
        out.content += seg;
        pending_.erase(0, end);
    } else if (s != std::string::npos || final) {
        pending_.erase(0, end);  // white space between messages
    }
    if (s == std::string::npos) return false;  // (white space alone is held: text may follow it)
    pending_.erase(0, kStart.size());
    opened_ = kStart;
    stray_ = false;
    state_ = State::header;
    return true;
}

bool HarmonySplitter::step(ReasoningParts& out, bool final) {
    switch (state_) {
        case State::first_header:
        case State::header: return step_header(out, final);
        case State::body: return step_body(out, final);
        case State::between: return step_between(out, final);
        case State::plain:
            out.content += pending_;
            pending_.clear();
            return false;
    }
    return false;
}

ReasoningParts HarmonySplitter::feed(std::string_view text) {
    ReasoningParts out;
    pending_.append(text);
    while (step(out, false)) {
    }
    return out;
}

ReasoningParts HarmonySplitter::finish() {
    ReasoningParts out;
    while (step(out, true)) {
    }
    return out;
}

ReasoningParts split_harmony(std::string_view text) {
    HarmonySplitter s;
    return split_whole(s, text);
}

}  // namespace pagoda::chat
