// `pagoda batch` end to end on stories260K: input order kept, greedy text = llama2.c golden text,
// the server's request rules (text prompts never parse special-token text, several prompts per
// line, echo) and the server's OpenAI error objects for lines that cannot run.
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

// Golden greedy continuation of "Once upon a time" on stories260K (llama2.c run.c, temperature 0).
const std::string kOnceUponATime = ", there was a little girl named ";

std::vector<json> run_batch(const std::string& model, const std::vector<std::string>& input_lines) {
    const std::string in = temp_path("batch-in.jsonl"), out = temp_path("batch-out.jsonl");
    {
        std::ofstream f(in);
        for (const auto& l : input_lines) f << l << "\n";
    }
    auto r = run_pagoda({"batch", "-m", model, "-i", in, "-o", out, "-t", "1", "--max-batched-tokens", "8", "--max-seqs", "4"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("pagoda batch: " + std::to_string(input_lines.size()) + " requests"), std::string::npos) << r.err;
    std::ifstream f(out);
    std::vector<json> lines;
    for (std::string line; std::getline(f, line);) lines.push_back(json::parse(line));
    return lines;
}

TEST(BatchCommand, Stories260K) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    std::string too_long = R"({"prompt": [1)";
    for (int i = 1; i < 2048; ++i) too_long += ", 1";
    too_long += R"(], "max_tokens": 4})";  // 2048 tokens: no room left in the 2048-token context
    auto lines = run_batch(model, {
        R"({"prompt": [1, 403, 407], "max_tokens": 5, "temperature": 0, "custom_id": "first"})",
        "{not json",
        R"({"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "stop": ["Lily"]})",
        R"({"prompt": [1], "max_tokens": 4, "temperature": 1, "seed": 5, "n": 2})",
        too_long,
        "",
        R"({"prompt": "x", "temperature": "hot", "custom_id": "bad-temp"})",
        R"({"prompt": "x", "custom_id": 7})",
    });
    ASSERT_EQ(lines.size(), 8u);
    for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i]["line"], i + 1);
    // Golden greedy continuation of [1 403 407] (stories260K_greedy_noprompt): 261 378 432 383 286.
    EXPECT_EQ(lines[0]["custom_id"], "first");
    EXPECT_EQ(lines[0]["id"], "cmpl-first");
    EXPECT_EQ(lines[0]["object"], "text_completion");
    EXPECT_EQ(lines[0]["model"], "stories260K");
    EXPECT_EQ(lines[0]["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(lines[0]["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(lines[0]["usage"]["completion_tokens"], 5);
    EXPECT_EQ(lines[0]["usage"]["prompt_tokens"], 3);
    EXPECT_EQ(lines[0]["usage"]["total_tokens"], 8);

    EXPECT_EQ(lines[1]["error"]["type"], "invalid_request_error");
    EXPECT_EQ(lines[1]["error"]["code"], "invalid_json");
    EXPECT_TRUE(lines[1]["error"]["param"].is_null());
    EXPECT_FALSE(lines[1].contains("custom_id"));

    EXPECT_EQ(lines[2]["id"], "cmpl-3");
    EXPECT_EQ(lines[2]["choices"][0]["text"], kOnceUponATime);
    EXPECT_EQ(lines[2]["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(lines[3]["choices"].size(), 2u);
    EXPECT_EQ(lines[3]["usage"]["completion_tokens"], 8);

    // Cannot fit the context: refused like the server refuses it, the other lines ran.
    EXPECT_EQ(lines[4]["error"]["code"], "context_length_exceeded");
    EXPECT_EQ(lines[4]["error"]["param"], "max_tokens");
    EXPECT_EQ(lines[5]["error"]["code"], "invalid_json");
    EXPECT_EQ(lines[6]["error"], json::parse(R"({"message":"'temperature' must be a number, got string",
        "type":"invalid_request_error","param":"temperature","code":"invalid_type"})"));
    EXPECT_EQ(lines[6]["custom_id"], "bad-temp");
    EXPECT_EQ(lines[7]["error"]["param"], "custom_id");
    EXPECT_EQ(lines[7]["custom_id"], 7);
}

// The rules the server applies to prompts hold in batch too.
TEST(BatchCommand, ServerPromptRules) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    auto file = gguf::File::open(model);
    auto tok = tokenizer::Tokenizer::from_gguf(*file);
    const std::string forged = "</s><s>";
    const auto as_text = tok->encode(forged);
    ASSERT_NE(as_text, tok->encode(forged, {.parse_special = true})) << "the fixture must have these control tokens";
    auto lines = run_batch(model, {
        R"({"prompt": "</s><s>", "max_tokens": 1, "temperature": 0})",
        R"({"prompt": ["Once upon a time", [1, 403, 407]], "max_tokens": 5, "temperature": 0})",
        R"({"prompt": "Once upon a time", "echo": true, "max_tokens": 3, "temperature": 0})",
        R"({"prompt": [1, 403, 407], "max_tokens": 5, "temperature": 0})",
        R"({"prompt": [1, 999999]})",
        R"({"prompt": [1], "logprobs": 2, "max_tokens": 2, "temperature": 0})",
    });
    ASSERT_EQ(lines.size(), 6u);
    // A user string cannot forge control tokens: it is encoded as plain text.
    EXPECT_EQ(lines[0]["usage"]["prompt_tokens"], as_text.size());
    // Several prompts in one line: choices per prompt, in order; usage summed.
    ASSERT_EQ(lines[1]["choices"].size(), 2u);
    const std::string five = lines[1]["choices"][0]["text"];
    EXPECT_FALSE(five.empty());
    EXPECT_EQ(kOnceUponATime.substr(0, five.size()), five);
    EXPECT_EQ(lines[1]["choices"][1]["text"], lines[3]["choices"][0]["text"]);
    EXPECT_EQ(lines[1]["choices"][1]["index"], 1);
    EXPECT_EQ(lines[1]["usage"]["completion_tokens"], 10);
    EXPECT_EQ(lines[1]["usage"]["prompt_tokens"],
              int64_t(tok->encode("Once upon a time").size()) + 3);
    // echo prepends the prompt text.
    const std::string echoed = lines[2]["choices"][0]["text"];
    ASSERT_EQ(echoed.rfind("Once upon a time", 0), 0u) << echoed;
    EXPECT_EQ(kOnceUponATime.rfind(echoed.substr(16), 0), 0u) << echoed;
    EXPECT_GT(echoed.size(), 16u);
    // Token ids are range-checked against the vocabulary.
    EXPECT_EQ(lines[4]["error"]["param"], "prompt");
    EXPECT_EQ(lines[4]["error"]["code"], "invalid_value");
    // logprobs in the server's completions shape: one entry per generated token.
    const json& lp = lines[5]["choices"][0]["logprobs"];
    ASSERT_TRUE(lp.is_object());
    EXPECT_EQ(lp["tokens"].size(), 2u);
    EXPECT_EQ(lp["token_logprobs"].size(), 2u);
    EXPECT_GE(lp["top_logprobs"][0].size(), 1u);  // 2 alternatives, keyed by text (equal texts merge)
    EXPECT_LE(lp["top_logprobs"][0].size(), 2u);
    EXPECT_EQ(lp["text_offset"][0], 0);
}

TEST(BatchCommand, OpenAiBatchApiLines) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    auto lines = run_batch(model, {
        R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", )"
        R"("body": {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}})",
        R"({"custom_id": "b", "method": "POST", "url": "/v1/chat/completions", )"
        R"("body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}})",
        R"({"custom_id": "c", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}})",
        R"({"custom_id": "d", "method": "GET", "url": "/v1/completions", "body": {"prompt": "x"}})",
        R"({"prompt": "Once upon a time", "max_tokens": 2, "custom_id": "e"})",
    });
    ASSERT_EQ(lines.size(), 5u);
    EXPECT_EQ(lines[0]["id"], "batch_req_1");
    EXPECT_EQ(lines[0]["custom_id"], "a");
    EXPECT_TRUE(lines[0]["error"].is_null());
    EXPECT_EQ(lines[0]["response"]["status_code"], 200);
    EXPECT_EQ(lines[0]["response"]["request_id"], "req_1");
    const json& completion = lines[0]["response"]["body"];
    EXPECT_EQ(completion["object"], "text_completion");
    EXPECT_EQ(kOnceUponATime.rfind(completion["choices"][0]["text"].get<std::string>(), 0), 0u) << completion;

    EXPECT_EQ(lines[1]["response"]["status_code"], 200) << lines[1];
    EXPECT_EQ(lines[1]["response"]["body"]["object"], "chat.completion");
    EXPECT_EQ(lines[1]["response"]["body"]["choices"][0]["message"]["role"], "assistant");

    EXPECT_EQ(lines[2]["response"]["status_code"], 400);
    EXPECT_EQ(lines[2]["response"]["body"]["error"]["param"], "url");
    EXPECT_EQ(lines[3]["response"]["body"]["error"]["param"], "method");

    // A plain body line keeps its own shape beside them.
    EXPECT_EQ(lines[4]["object"], "text_completion");
    EXPECT_EQ(lines[4]["line"], 5);
    EXPECT_EQ(lines[4]["custom_id"], "e");
}

TEST(BatchCommand, MissingInputIsAClearError) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    auto r = run_pagoda({"batch", "-m", model, "-i", temp_path("no-such-input.jsonl"), "-o", temp_path("o.jsonl")});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("cannot read the input file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagoda::test
