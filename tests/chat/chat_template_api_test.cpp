// The public ChatTemplate API: builtin names, --chat-template NAME|FILE, message validation, the
// ChatMessage and JSON overloads, and concurrent rendering of one parsed template.
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "oracle_cases.h"

namespace pagoda::test {
namespace {

using pagoda::chat::ChatMessage;
using pagoda::chat::ChatRenderOptions;
using pagoda::chat::ChatTemplate;

TEST(ChatTemplateApi, BuiltinsAreTheCommittedTemplateFiles) {
    const auto& builtins = pagoda::chat::builtin_chat_templates();
    ASSERT_GE(builtins.size(), 10u);
    for (const auto& t : builtins) {
        SCOPED_TRACE(std::string(t.name));
        EXPECT_EQ(std::string(t.source), read_text(chat_data_dir() + "/" + std::string(t.file)))
            << "rerun tests/data/chat_templates/gen_builtins.py";
        EXPECT_NO_THROW(ChatTemplate::builtin(std::string(t.name)));
    }
    for (const char* name : {"chatml", "llama2", "llama3", "mistral", "phi3", "gemma", "deepseek", "zephyr", "qwen2.5", "qwen3"})
        EXPECT_NO_THROW(ChatTemplate::builtin(name)) << name;
}

TEST(ChatTemplateApi, UnknownBuiltinListsKnownNames) {
    try {
        ChatTemplate::builtin("vicuna-9000");
        FAIL() << "expected an error";
    } catch (const pagoda::Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("unknown chat template 'vicuna-9000'"), std::string::npos) << what;
        EXPECT_NE(what.find("chatml"), std::string::npos) << what;
        EXPECT_NE(what.find("llama3"), std::string::npos) << what;
    }
}

TEST(ChatTemplateApi, NameOrFile) {
    EXPECT_EQ(ChatTemplate::from_name_or_file("zephyr").name(), "zephyr");
    const std::string path = temp_path("custom.jinja");
    {
        std::ofstream out(path);
        out << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
    }
    const auto tmpl = ChatTemplate::from_name_or_file(path);
    EXPECT_EQ(tmpl.render({{"user", "hi"}, {"assistant", "yo"}}, true, "", ""), "[user] hi\n[assistant] yo\n");
    {
        std::ofstream out(path);
        out << "ok\n{% if %}";
    }
    try {
        ChatTemplate::from_name_or_file(path);
        FAIL() << "expected a syntax error";
    } catch (const pagoda::Error& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("line 2, column 7"), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
    try {
        ChatTemplate::from_name_or_file("/nonexistent/template.jinja");
        FAIL() << "expected an error";
    } catch (const pagoda::Error& e) {
        EXPECT_NE(std::string(e.what()).find("neither a known template name"), std::string::npos) << e.what();
    }
}

TEST(ChatTemplateApi, ChatMessageOverloadMatchesJson) {
    const auto tmpl = ChatTemplate::builtin("llama3");
    const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
    const std::string expected =
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
    EXPECT_EQ(tmpl.render(messages, true, "<|begin_of_text|>", "<|eot_id|>"), expected);
    ChatRenderOptions options;
    options.bos_token = "<|begin_of_text|>";
    options.eos_token = "<|eot_id|>";
    const nlohmann::json plain = nlohmann::json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])");
    EXPECT_EQ(tmpl.render(plain, options), expected);
}

TEST(ChatTemplateApi, ExtraVariablesAndTools) {
    const auto tmpl = ChatTemplate::from_source(
        "{{ tools is none }}|{{ documents is none }}|{{ enable_thinking }}|{{ tools|length if tools else 0 }}|{{ bos_token }}");
    ChatRenderOptions options;
    options.bos_token = "<s>";
    options.extra = {{"enable_thinking", false}};
    EXPECT_EQ(tmpl.render(nlohmann::ordered_json::array(), options), "True|True|False|0|<s>");
    options.tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f"}}])");
    options.extra["bos_token"] = "[override]";
    EXPECT_EQ(tmpl.render(nlohmann::ordered_json::array(), options), "False|True|False|1|[override]");
}

TEST(ChatTemplateApi, RejectsMalformedMessages) {
    const auto tmpl = ChatTemplate::builtin("chatml");
    ChatRenderOptions options;
    EXPECT_THROW(tmpl.render(nlohmann::ordered_json::object(), options), pagoda::Error);
    EXPECT_THROW(tmpl.render(nlohmann::ordered_json::parse(R"(["just a string"])"), options), pagoda::Error);
    // A message without content: the template sees undefined, and ChatML's `+` refuses it.
    try {
        tmpl.render(nlohmann::ordered_json::parse(R"([{"role":"user"}])"), options);
        FAIL() << "expected an error";
    } catch (const pagoda::Error& e) {
        EXPECT_NE(std::string(e.what()).find("has no attribute 'content'"), std::string::npos) << e.what();
    }
}

TEST(ChatTemplateApi, ConcurrentRendersOfOneTemplateAgree) {
    const auto tmpl = ChatTemplate::builtin("qwen3");
    const auto messages = nlohmann::ordered_json::parse(
        R"([{"role":"system","content":"sys"},{"role":"user","content":"q1"},{"role":"assistant","content":"<think>r</think>a1"},{"role":"user","content":"q2"}])");
    ChatRenderOptions options;
    const std::string reference = tmpl.render(messages, options);
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i)
                if (tmpl.render(messages, options) != reference) ++mismatches[static_cast<std::size_t>(t)];
        });
    }
    for (auto& th : threads) th.join();
    for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace pagoda::test
