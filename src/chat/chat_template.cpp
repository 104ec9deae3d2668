#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/builtin_templates.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_parser.h"
#include "core/error.h"

namespace pagoda::chat {

namespace {
constexpr std::uintmax_t kMaxTemplateFileBytes = 4u << 20;

// The text a continued final message ends with: its content, or its last text part.
std::string final_message_text(const nlohmann::ordered_json& messages) {
    if (messages.empty()) fail("continue_final_message needs a final message");
    const auto& content = messages.back().contains("content") ? messages.back()["content"] : nlohmann::ordered_json();
    if (content.is_string()) return content.get<std::string>();
    if (content.is_array())
        for (auto it = content.rbegin(); it != content.rend(); ++it)
            if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) return (*it)["text"].get<std::string>();
    fail("continue_final_message: the final message has no text to continue");
}

std::string trim(const std::string& s, bool left, bool right) {
    const char* ws = " \t\n\r\f\v";
    size_t b = left ? s.find_first_not_of(ws) : 0;
    if (b == std::string::npos) return {};
    size_t e = right ? s.find_last_not_of(ws) + 1 : s.size();
    return s.substr(b, e - b);
}

// Cuts `rendered` right after the final message's content. The template may have trimmed the
// content's surrounding white space: the last occurrence of the trimmed text is found, and the cut
// keeps the message's trailing white space only where the template kept it too.
std::string cut_after_final_message(const std::string& rendered, const std::string& message) {
    const std::string stripped = trim(message, true, true);
    const size_t at = rendered.rfind(stripped);
    if (stripped.empty() || at == std::string::npos)
        fail("continue_final_message: the final message's text does not appear in the rendered template, so it "
             "cannot be continued");
    const std::string left_trimmed = trim(message, true, false);
    if (rendered.compare(at, left_trimmed.size(), left_trimmed) == 0) return rendered.substr(0, at + left_trimmed.size());
    return rendered.substr(0, at + stripped.size());
}

std::string known_names() {
    std::string names;
    for (const auto& t : builtin_chat_templates()) {
        if (!names.empty()) names += ", ";
        names += t.name;
    }
    return names;
}
}  // namespace

ChatTemplate::ChatTemplate(std::string name, std::string source, std::shared_ptr<const jinja::Program> program)
    : name_(std::move(name)), source_(std::move(source)), program_(std::move(program)) {
    takes_content_parts_ = probe_content_parts();
}

bool ChatTemplate::probe_content_parts() const {
    // Render one user turn twice, its content as a string and as one text part. A template that
    // handles parts shows the text from the parts (and from the string alike, or not at all if it
    // iterates the content); one that wants a string fails on the list or prints it as a list.
    const std::string text = "pagoda content probe";
    ChatRenderOptions o;
    o.now = 0;
    auto as_parts = nlohmann::ordered_json::array(
        {{{"role", "user"}, {"content", nlohmann::ordered_json::array({{{"type", "text"}, {"text", text}}})}}});
    auto as_string = nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}});
    std::string parts_out, string_out;
    try {
        parts_out = render(as_parts, o);
    } catch (const std::exception&) {
        return false;
    }
    if (parts_out.find(text) == std::string::npos) return false;
    try {
        string_out = render(as_string, o);
    } catch (const std::exception&) {
        return true;
    }
    // Both show the text: the template takes either, unless the parts form printed the list itself.
    return string_out.find(text) == std::string::npos || parts_out == string_out;
}

ChatTemplate ChatTemplate::from_source(std::string source, std::string name) {
    auto program = jinja::parse_template(source);
    return ChatTemplate(std::move(name), std::move(source), std::move(program));
}

ChatTemplate ChatTemplate::builtin(const std::string& name) {
    for (const auto& t : builtin_chat_templates())
        if (t.name == name) return from_source(std::string(t.source), std::string(t.name));
    fail("unknown chat template '{}' (known: {})", name, known_names());
}

std::vector<std::string> ChatTemplate::builtin_names() {
    std::vector<std::string> names;
    for (const auto& t : builtin_chat_templates()) names.emplace_back(t.name);
    return names;
}

ChatTemplate ChatTemplate::from_name_or_file(const std::string& name_or_path) {
    for (const auto& t : builtin_chat_templates())
        if (t.name == name_or_path) return builtin(name_or_path);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(name_or_path, ec))
        fail("--chat-template '{}' is neither a known template name ({}) nor a readable file", name_or_path, known_names());
    const auto size = std::filesystem::file_size(name_or_path, ec);
    if (ec) fail("cannot read chat template file '{}': {}", name_or_path, ec.message());
    if (size > kMaxTemplateFileBytes)
        fail("chat template file '{}' is {} bytes; the limit is {}", name_or_path, size, kMaxTemplateFileBytes);
    std::ifstream in(name_or_path, std::ios::binary);
    if (!in) fail("cannot open chat template file '{}'", name_or_path);
    std::ostringstream text;
    text << in.rdbuf();
    try {
        return from_source(text.str(), name_or_path);
    } catch (const Error& e) {
        fail("chat template file '{}': {}", name_or_path, e.what());
    }
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token) const {
    auto list = nlohmann::ordered_json::array();
    for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
    ChatRenderOptions options;
    options.add_generation_prompt = add_generation_prompt;
    options.bos_token = bos_token;
    options.eos_token = eos_token;
    return render(list, options);
}

std::string ChatTemplate::render(const nlohmann::json& messages, const ChatRenderOptions& options) const {
    return render(nlohmann::ordered_json::parse(messages.dump()), options);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const {
    using namespace jinja;
    if (!messages.is_array()) fail("chat messages must be a JSON array, got {}", messages.type_name());
    for (std::size_t i = 0; i < messages.size(); ++i)
        if (!messages[i].is_object()) fail("chat message {} must be a JSON object, got {}", i, messages[i].type_name());
    if (!options.extra.is_object()) fail("chat template variables must be a JSON object");

    auto globals = new_globals(options.now ? *options.now : std::time(nullptr));
    globals->set("messages", Value::from_json(messages));
    globals->set("add_generation_prompt", Value(options.add_generation_prompt));
    globals->set("bos_token", Value(options.bos_token));
    globals->set("eos_token", Value(options.eos_token));
    globals->set("tools", Value::from_json(options.tools));
    globals->set("documents", Value::none());
    for (auto it = options.extra.begin(); it != options.extra.end(); ++it) globals->set(it.key(), Value::from_json(it.value()));
    if (!options.continue_final_message) return render_program(*program_, std::move(globals));
    if (options.add_generation_prompt) fail("continue_final_message and add_generation_prompt cannot both be set");
    const std::string message = final_message_text(messages);
    return cut_after_final_message(render_program(*program_, std::move(globals)), message);
}

}  // namespace pagoda::chat
