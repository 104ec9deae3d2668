// Prints a chat reply to stdout as it streams, and keeps what goes back into the history. With a
// template that thinks (<think>…</think>, see chat/reasoning.h) the reasoning is shown apart from
// the answer — dim on a terminal, between <think> and </think> lines elsewhere — or hidden; the
// history keeps the answer only, as OpenAI clients send it back. Without one everything is answer.
#pragma once
#include <cstdio>
#include <optional>
#include <string>

#include "chat/reasoning.h"

namespace pagoda::app {

class ReplyPrinter {
public:
    // split: separate reasoning; start_in_reasoning: the prompt already opened <think>.
    ReplyPrinter(bool split, bool start_in_reasoning, bool show_reasoning, bool terminal,
                 chat::ReasoningFormat format = chat::ReasoningFormat::deepseek)
        : show_(show_reasoning), terminal_(terminal) {
        if (split) splitter_.emplace(format, start_in_reasoning);
    }

    void feed(const std::string& text) {
        if (!splitter_) return answer(text);
        print(splitter_->feed(text));
    }
    // Releases held-back text and ends the reply's line (an empty reply is an empty line).
    void finish() {
        if (splitter_) print(splitter_->finish());
        close_reasoning();
        if (!printed_ || !ends_in_newline_) std::fputc('\n', stdout);  // a reply is at least one line
        std::fflush(stdout);
    }
    const std::string& content() const { return content_; }
    bool printed_anything() const { return printed_; }

private:
    void print(const chat::ReasoningParts& parts) {
        if (!parts.reasoning.empty()) reasoning(parts.reasoning);
        if (!parts.content.empty()) answer(parts.content);
    }
    void reasoning(const std::string& text) {
        if (!show_) return;
        if (!in_reasoning_) {
            in_reasoning_ = true;
            if (!terminal_) write("<think>\n");
        }
        if (terminal_) std::fputs("\x1b[2m", stdout);  // dim
        write(text);
        if (terminal_) std::fputs("\x1b[0m", stdout);
    }
    void close_reasoning() {
        if (!in_reasoning_) return;
        in_reasoning_ = false;
        if (!ends_in_newline_) write("\n");
        if (!terminal_) write("</think>\n");
    }
    void answer(const std::string& text) {
        close_reasoning();
        content_ += text;
        write(text);
    }
    void write(const std::string& text) {
        if (text.empty()) return;
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        printed_ = true;
        ends_in_newline_ = text.back() == '\n';
    }

    std::optional<chat::ReasoningSplitter> splitter_;
    bool show_, terminal_;
    bool in_reasoning_ = false, printed_ = false, ends_in_newline_ = false;
    std::string content_;
};

}  // namespace pagoda::app
