// What the reasoning splitters (chat/reasoning.h, chat/harmony.h) return: the new reasoning text
// and the new content text of a piece of output.
#pragma once
#include <string>

namespace pagoda::chat {

struct ReasoningParts {
    std::string reasoning;
    std::string content;
};

}  // namespace pagoda::chat
