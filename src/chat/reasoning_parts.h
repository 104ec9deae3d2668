// What the reasoning splitters (chat/reasoning.h, chat/harmony.h) return: the new reasoning text
// and the new content text of a piece of output.
#pragma once
#include <string>
#include <string_view>

namespace pagoda::chat {

struct ReasoningParts {
    std::string reasoning;
    std::string content;
};

// A whole text through a streaming splitter: what feed() gives, then what finish() adds.
template <class Splitter>
ReasoningParts split_whole(Splitter& splitter, std::string_view text) {
    ReasoningParts a = splitter.feed(text);
    ReasoningParts b = splitter.finish();
    a.reasoning += b.reasoning;
    a.content += b.content;
    return a;
}

}  // namespace pagoda::chat
