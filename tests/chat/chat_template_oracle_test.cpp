// Renders every (real chat template, conversation) pair and every interpreter case listed in
// tests/data/chat_templates/expected.json and compares byte for byte with what Python's jinja2 —
// configured as Hugging Face's apply_chat_template — produced. When /usr/bin/python3 has jinja2, the
// oracle is also re-run live so the committed expectations can never drift from the templates.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "oracle_cases.h"

namespace pagoda::test {
namespace {

using pagoda::chat::ChatRenderOptions;
using pagoda::chat::ChatTemplate;
using pagoda::chat::jinja::TemplateRaised;

std::string case_label(const nlohmann::ordered_json& c) {
    if (c.contains("template") && c.contains("case")) return c["template"].get<std::string>() + " / " + c["case"].get<std::string>();
    return c["name"].get<std::string>();
}

TEST(ChatTemplateOracle, ExpectationsCoverEveryFamily) {
    const auto& cases = expected_cases();
    ASSERT_GE(cases["chat"].size(), 200u);
    ASSERT_GE(cases["unit"].size(), 80u);
    std::set<std::string> families;
    for (const auto& c : cases["chat"]) families.insert(c["template"].get<std::string>());
    for (const char* f : {"llama2", "llama3", "llama3.1", "mistral-v1", "mistral-v3", "qwen2.5", "qwen3", "phi3", "gemma",
                          "gemma1", "deepseek", "deepseek-r1", "chatml", "zephyr", "hermes3-tool-use", "granite3.3",
                          "gpt-oss"})
        EXPECT_TRUE(families.count(f)) << f;
}

TEST(ChatTemplateOracle, RealTemplatesMatchJinja2) {
    const std::time_t now = oracle_now();
    int rendered = 0, raised = 0;
    for (const auto& c : expected_cases()["chat"]) {
        SCOPED_TRACE(case_label(c));
        const std::string source = read_text(chat_data_dir() + "/" + c["template"].get<std::string>() + ".jinja");
        const ChatTemplate tmpl = ChatTemplate::from_source(source, c["template"].get<std::string>());
        ChatRenderOptions options;
        options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
        options.bos_token = c["bos_token"].get<std::string>();
        options.eos_token = c["eos_token"].get<std::string>();
        options.tools = c["tools"];
        options.extra = c["extra"];
        options.now = now;
        if (c.contains("expected")) {
            std::string got;
            ASSERT_NO_THROW(got = tmpl.render(c["messages"], options));
            EXPECT_EQ(got, c["expected"].get<std::string>());
            ++rendered;
        } else {
            ASSERT_EQ(c["error_kind"], "raise_exception");
            try {
                tmpl.render(c["messages"], options);
                ADD_FAILURE() << "expected raise_exception: " << c["error"];
            } catch (const TemplateRaised& e) {
                EXPECT_EQ(std::string(e.what()), c["error"].get<std::string>());
            }
            ++raised;
        }
    }
    EXPECT_GT(rendered, 150);
    EXPECT_GT(raised, 20);
}

TEST(ChatTemplateOracle, InterpreterCasesMatchJinja2) {
    for (const auto& c : expected_cases()["unit"]) {
        SCOPED_TRACE(case_label(c) + ": " + c["template"].get<std::string>());
        const std::string source = c["template"].get<std::string>();
        if (c.contains("expected")) {
            try {
                EXPECT_EQ(render_jinja(source, c["variables"]), c["expected"].get<std::string>());
            } catch (const std::exception& e) {
                ADD_FAILURE() << "unexpected error: " << e.what();
            }
        } else if (c["error_kind"] == "raise_exception") {
            try {
                render_jinja(source, c["variables"]);
                ADD_FAILURE() << "expected raise_exception";
            } catch (const TemplateRaised& e) {
                EXPECT_EQ(std::string(e.what()), c["error"].get<std::string>());
            }
        } else {
            // Runtime errors (TypeError, ZeroDivisionError, sandbox refusals…): pagoda must refuse too,
            // with a located message.
            try {
                render_jinja(source, c["variables"]);
                ADD_FAILURE() << "expected an error like: " << c["error"];
            } catch (const TemplateRaised& e) {
                ADD_FAILURE() << "unexpected raise_exception: " << e.what();
            } catch (const pagoda::Error& e) {
                EXPECT_NE(std::string(e.what()).find("line 1, column"), std::string::npos) << e.what();
            }
        }
    }
}

TEST(ChatTemplateOracle, CommittedExpectationsMatchLiveOracle) {
    const std::string python = "/usr/bin/python3";
    if (!std::filesystem::exists(python) || std::system((python + " -c 'import jinja2' >/dev/null 2>&1").c_str()) != 0)
        GTEST_SKIP() << "/usr/bin/python3 with jinja2 not available; using the committed expected.json only";
    const std::string out = temp_path("chat_expected_live.json");
    const std::string cmd = python + " '" + chat_data_dir() + "/make_expected.py' --stdout > '" + out + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    EXPECT_TRUE(read_text(out) == read_text(chat_data_dir() + "/expected.json"))
        << "tests/data/chat_templates/expected.json is stale: rerun /usr/bin/python3 make_expected.py";
    std::filesystem::remove(out);
}

}  // namespace
}  // namespace pagoda::test
