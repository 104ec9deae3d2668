// Chat templates: turn the messages of an OpenAI chat request into the prompt text a model was
// trained on, by rendering the model's Jinja `tokenizer.chat_template` exactly as Hugging Face's
// apply_chat_template does (same whitespace settings, tojson, raise_exception, loop controls).
//
//   auto tmpl = ChatTemplate::from_source(gguf_chat_template);   // parse once (throws on bad syntax)
//   std::string prompt = tmpl.render(messages, /*add_generation_prompt=*/true, "<s>", "</s>");
//
// The template sees: messages (a list of dicts — every field of each message, so tool_calls,
// content parts, reasoning_content… are visible), add_generation_prompt, bos_token, eos_token,
// tools and documents (none unless given) and any extra variables (enable_thinking, date_string…).
// Errors — template syntax, runtime errors, raise_exception('…') — are pagoda::Error; for
// raise_exception the message is exactly the template's text (type jinja::TemplateRaised).
// A ChatTemplate is immutable after construction and safe to render from many threads at once.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::chat {

namespace jinja {
struct Program;
}

struct ChatMessage {
    std::string role;
    std::string content;
};

struct ChatRenderOptions {
    bool add_generation_prompt = true;
    // The prompt continues the final message (an assistant prefill) rather than closing it: the text
    // is rendered, then cut right after that message's content, as transformers'
    // apply_chat_template(continue_final_message=True) does. Needs add_generation_prompt false and a
    // final message whose text (a string, or the last text part) appears in the rendered text.
    bool continue_final_message = false;
    std::string bos_token;
    std::string eos_token;
    nlohmann::ordered_json tools = nullptr;  // OpenAI `tools` array; null: the template sees none
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables; override the above
    std::optional<std::time_t> now;  // clock for strftime_now(); default: the current time
};

class ChatTemplate {
public:
    // Parses `source`; throws pagoda::Error (with line and column) on syntax errors.
    static ChatTemplate from_source(std::string source, std::string name = "custom");
    // A template pagoda ships (see builtin_names()); throws listing the known names otherwise.
    static ChatTemplate builtin(const std::string& name);
    static std::vector<std::string> builtin_names();
    // For --chat-template NAME|FILE: a builtin name, else a file holding a Jinja template.
    static ChatTemplate from_name_or_file(const std::string& name_or_path);

    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                       const std::string& bos_token, const std::string& eos_token) const;
    // `messages` is an OpenAI messages array, passed to the template as-is (content may be a
    // string, null or an array of parts). Throws if it is not an array of objects.
    std::string render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const;
    std::string render(const nlohmann::json& messages, const ChatRenderOptions& options) const;

    // Whether the template renders OpenAI content arrays ([{"type":"text","text":…}]) itself;
    // found by rendering a probe at construction. When false, callers flatten text parts into a
    // string first, as the template expects one.
    bool takes_content_parts() const { return takes_content_parts_; }

    const std::string& name() const { return name_; }
    const std::string& source() const { return source_; }

private:
    ChatTemplate(std::string name, std::string source, std::shared_ptr<const jinja::Program> program);
    bool probe_content_parts() const;

    std::string name_;
    std::string source_;
    std::shared_ptr<const jinja::Program> program_;
    bool takes_content_parts_ = false;
};

}  // namespace pagoda::chat
