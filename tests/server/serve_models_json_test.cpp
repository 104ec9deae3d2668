// Per-model settings in DIR/models.json on a running server (server/models_json.h): two ids of one
// GGUF file get their own context size (/v1/models max_model_len), chat template (a chat request's
// prompt is the template's rendering: the same tokens and greedy answer as a completion of that
// rendered text), aliases and LoRA adapters (answering as the same adapter given with --lora), while
// a model without settings keeps the server-wide flags; and a bad file stops the start naming it.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/random_adapter.h"
#include "server/serve_harness.h"

using namespace pagoda::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json post(int port, const std::string& path, const json& body) {
    const HttpResult r = http_request(port, "POST", path, body.dump());
    json j = json::parse(r.body.empty() ? "{}" : r.body, nullptr, false);
    if (j.is_discarded()) j = json{{"raw", r.body}};
    j["_status"] = r.status;
    return j;
}

json card(int port, const std::string& id) { return json::parse(http_request(port, "GET", "/v1/models/" + id).body); }

TEST(ServeModelsJson, EachModelGetsItsOwnContextTemplateAliasesAndAdapters) {
    const std::string base = server_test_model();
    const fs::path dir = temp_path("models-json-serve");
    fs::create_directories(dir);
    const std::string adapter = (dir / "la.gguf").string();
    pagoda::lora::write_random_adapter(*pagoda::gguf::File::open(base), {.rank = 8, .alpha = 16, .seed = 51}, adapter, "");
    std::ofstream(dir / "brackets.jinja") << "{% for m in messages %}[{{ m.content }}]{% endfor %}";
    std::ofstream(dir / "models.json") << json{
        {"short", {{"path", base}, {"ctx_size", 64}, {"chat_template", "brackets.jinja"}, {"lora", {"la=la.gguf"}}}},
        {"long", {{"path", base}, {"ctx_size", 200}, {"aliases", {"long2"}}}},
        {"plain", base}}.dump();
    const std::string want_la = [&] {
        ServeProcess alone({"--lora", "x=" + adapter}, base);
        return post(alone.port(), "/v1/completions",
                    {{"model", "x"}, {"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}})["choices"][0]
            ["text"].get<std::string>();
    }();
    ServeProcess server({"--models-dir", dir.string(), "-c", "96"}, "first=" + base);

    const json chat_body = {{"messages", {{{"role", "user"}, {"content", "Hello there"}}}}, {"max_tokens", 8},
                            {"temperature", 0}};
    json chat_short = chat_body, chat_long = chat_body;
    chat_short["model"] = "short", chat_long["model"] = "long";
    const json a = post(server.port(), "/v1/chat/completions", chat_short);
    ASSERT_EQ(a["_status"], 200) << a.dump();
    // The template renders "[Hello there]": a completion of that text is the same prompt and answer.
    const json rendered = post(server.port(), "/v1/completions",
                               {{"model", "short"}, {"prompt", "[Hello there]"}, {"max_tokens", 8}, {"temperature", 0}});
    ASSERT_EQ(rendered["_status"], 200) << rendered.dump();
    EXPECT_EQ(a["usage"]["prompt_tokens"], rendered["usage"]["prompt_tokens"]);
    EXPECT_EQ(a["choices"][0]["message"]["content"], rendered["choices"][0]["text"]);
    // "long" keeps the server-wide chatml: another prompt.
    const json b = post(server.port(), "/v1/chat/completions", chat_long);
    ASSERT_EQ(b["_status"], 200) << b.dump();
    EXPECT_NE(b["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"]);

    EXPECT_EQ(card(server.port(), "short")["max_model_len"], 64);
    EXPECT_EQ(card(server.port(), "long")["max_model_len"], 200);
    ASSERT_EQ(post(server.port(), "/v1/completions", {{"model", "plain"}, {"prompt", "Hi"}, {"max_tokens", 1}})["_status"],
              200);
    EXPECT_EQ(card(server.port(), "plain")["max_model_len"], 96);  // the server-wide -c
    // A prompt over "short"'s context is refused there, and fits "long".
    std::string words;
    int64_t n = 0;
    while (n <= 70) {
        words += " once upon";
        n = post(server.port(), "/tokenize", {{"model", "long"}, {"content", words}})["tokens"].size();
    }
    ASSERT_LT(n, 180);
    const json over = post(server.port(), "/v1/completions", {{"model", "short"}, {"prompt", words}, {"max_tokens", 4}});
    EXPECT_EQ(over["_status"], 400) << over.dump();
    EXPECT_EQ(post(server.port(), "/v1/completions", {{"model", "long"}, {"prompt", words}, {"max_tokens", 4}})["_status"],
              200);

    // The alias names "long" (its card lists it); the adapter belongs to "short".
    const json by_alias = post(server.port(), "/v1/completions", {{"model", "long2"}, {"prompt", "Hi"}, {"max_tokens", 2}});
    EXPECT_EQ(by_alias["_status"], 200) << by_alias.dump();
    EXPECT_EQ(by_alias["model"], "long");  // the response names the id
    EXPECT_EQ(card(server.port(), "long2")["id"], "long");
    EXPECT_EQ(card(server.port(), "long")["aliases"], json::array({"long2"}));
    const json la = post(server.port(), "/v1/completions",
                         {{"model", "la"}, {"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}});
    ASSERT_EQ(la["_status"], 200) << la.dump();
    EXPECT_EQ(la["choices"][0]["text"], want_la);
    EXPECT_EQ(card(server.port(), "la")["parent"], "short");
}

TEST(ServeModelsJson, ABadFileStopsTheStartNamingFileModelAndKey) {
    const fs::path dir = temp_path("models-json-bad-serve");
    fs::create_directories(dir);
    std::ofstream(dir / "models.json") << R"({"m": {"path": ")" + server_test_model() + R"(", "ctx_size": "big"}})";
    const ProcessResult r = run_pagoda({"serve", "--models-dir", dir.string(), "--port", "0"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find((dir / "models.json").string() + ": model 'm': 'ctx_size' must be an integer, got string"),
              std::string::npos)
        << r.err;
    std::ofstream(dir / "models.json") << R"({"m": {"path": ")" + server_test_model() +
                                              R"(", "max_seqs": 2, "max_batched_tokens": 1, "aliases": ["m"]}})";
    const ProcessResult dup = run_pagoda({"serve", "--models-dir", dir.string(), "--port", "0"});
    EXPECT_NE(dup.exit_code, 0);
    EXPECT_NE(dup.err.find("the alias 'm' of 'm' is already a model's id or alias"), std::string::npos) << dup.err;
}

}  // namespace
