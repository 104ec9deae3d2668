// Named chat templates pagoda ships, for GGUF files that carry no tokenizer.chat_template and for
// the --chat-template NAME flag. Each is the real chat_template of its model family, verbatim.
#pragma once
#include <string_view>
#include <vector>

namespace pagoda::chat {

struct BuiltinTemplate {
    std::string_view name;         // what --chat-template accepts
    std::string_view file;         // its copy under tests/data/chat_templates/
    std::string_view description;  // where it comes from
    std::string_view source;       // the Jinja template
};

const std::vector<BuiltinTemplate>& builtin_chat_templates();

}  // namespace pagoda::chat
