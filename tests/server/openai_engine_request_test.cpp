// CompletionParams -> engine requests: prompt tokenisation rules (no special-token parsing of user
// text, id range checks, echo text), context and vocabulary limits as OpenAI-shaped errors, the
// max_tokens defaults, and every field carried into engine::Request.
#include "server/openai_engine_request.h"

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

CompletionParams completions(const std::string& body) {
    return parse_completion_request(json::parse(body), Endpoint::completions);
}

TokenizedPrompts ids(std::vector<std::vector<int32_t>> prompts) { return {.prompts = std::move(prompts)}; }

const EngineLimits kLimits{.context = 64, .vocab_size = 100, .max_prompt_tokens = 0, .max_tokens_limit = 40};

ApiError error_of(const CompletionParams& p, TokenizedPrompts prompts, const EngineLimits& limits = kLimits) {
    try {
        make_engine_requests(p, std::move(prompts), limits);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "no error", "");
}

}  // namespace

TEST(OpenAiEngineRequest, CarriesEveryField) {
    auto p = completions(R"({"prompt":[[1,2],[3]],"n":2,"max_tokens":7,"stop":["a","bc"],"stop_token_ids":[9],
        "temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"repetition_penalty":1.1,"presence_penalty":0.5,
        "frequency_penalty":-0.5,"logit_bias":{"5":-100,"7":2.5},"seed":42,"logprobs":2,"ignore_eos":true})");
    auto r = make_engine_requests(p, ids({{1, 2}, {3}}), kLimits);
    ASSERT_EQ(r.subs.size(), 2u);
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_EQ(r.reserved_tokens, 3 + 2 * 2 * 7);  // prompt tokens + every choice's max_tokens
    for (size_t sub = 0; sub < 2; ++sub) {
        const pagoda::engine::Request& q = r.subs[sub];
        EXPECT_EQ(q.n, 2);
        EXPECT_EQ(q.logprobs, 2);
        EXPECT_EQ(q.stop.max_tokens, 7);
        EXPECT_TRUE(q.stop.ignore_eos);
        EXPECT_EQ(q.stop.stop, (std::vector<std::string>{"a", "bc"}));
        EXPECT_EQ(q.stop.stop_token_ids, (std::vector<int32_t>{9}));
        EXPECT_FLOAT_EQ(q.sampling.temperature, 0.5f);
        EXPECT_FLOAT_EQ(q.sampling.top_p, 0.9f);
        EXPECT_EQ(q.sampling.top_k, 40);
        EXPECT_FLOAT_EQ(q.sampling.min_p, 0.05f);
        EXPECT_FLOAT_EQ(q.sampling.repetition_penalty, 1.1f);
        EXPECT_FLOAT_EQ(q.sampling.presence_penalty, 0.5f);
        EXPECT_FLOAT_EQ(q.sampling.frequency_penalty, -0.5f);
        EXPECT_EQ(q.sampling.logit_bias, (std::map<int32_t, float>{{5, -100.0f}, {7, 2.5f}}));
    }
    EXPECT_EQ(r.subs[0].prompt, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(r.subs[1].prompt, (std::vector<int32_t>{3}));
    // Choice i of sub k samples with seed + k*n + i: no two choices of the request share a seed.
    EXPECT_EQ(r.subs[0].sampling.seed, 42u);
    EXPECT_EQ(r.subs[1].sampling.seed, 44u);
    auto unseeded = make_engine_requests(completions(R"({"prompt":[1]})"), ids({{1}}), kLimits);
    EXPECT_FALSE(unseeded.subs[0].sampling.seed.has_value());
}

TEST(OpenAiEngineRequest, MaxTokensDefaults) {
    // Completions: 16, or what is left of the context.
    EXPECT_EQ(make_engine_requests(completions(R"({"prompt":[1]})"), ids({{1}}), kLimits).max_tokens, 16);
    EXPECT_EQ(make_engine_requests(completions(R"({"prompt":[1]})"), ids({std::vector<int32_t>(60, 1)}), kLimits).max_tokens, 4);
    // Chat: as much as fits, within max_tokens_limit (0: only the context).
    auto chat = parse_completion_request(json::parse(R"({"messages":[{"role":"user","content":"x"}]})"),
                                         Endpoint::chat_completions);
    EXPECT_EQ(make_engine_requests(chat, ids({{1, 2, 3, 4}}), kLimits).max_tokens, 40);
    EXPECT_EQ(make_engine_requests(chat, ids({std::vector<int32_t>(50, 1)}), kLimits).max_tokens, 14);
    EXPECT_EQ(make_engine_requests(chat, ids({{1, 2, 3, 4}}), {.context = 64, .vocab_size = 100}).max_tokens, 60);
    // The longest prompt decides the room.
    EXPECT_EQ(make_engine_requests(completions(R"({"prompt":[[1],[1]]})"), ids({{1}, std::vector<int32_t>(55, 1)}), kLimits)
                  .max_tokens,
              9);
}

TEST(OpenAiEngineRequest, LimitsAreOpenAiErrors) {
    auto p = completions(R"({"prompt":[1]})");
    ApiError e = error_of(completions(R"({"prompt":[1],"logit_bias":{"100":1}})"), ids({{1}}));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "logit_bias");
    EXPECT_EQ(e.code, "invalid_value");
    EXPECT_EQ(error_of(completions(R"({"prompt":[1],"stop_token_ids":[3,100]})"), ids({{1}})).param, "stop_token_ids");
    EXPECT_EQ(error_of(p, ids({{}})).param, "prompt");
    // Prompt over the cap (the context, or max_prompt_tokens when smaller).
    e = error_of(p, ids({std::vector<int32_t>(65, 1)}));
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_EQ(std::string(e.what()), "the prompt has 65 tokens; the limit is 64");
    EXPECT_EQ(error_of(p, ids({std::vector<int32_t>(11, 1)}), {.context = 64, .vocab_size = 100, .max_prompt_tokens = 10})
                  .code,
              "context_length_exceeded");
    // A prompt that fills the context leaves no room for the default.
    e = error_of(p, ids({std::vector<int32_t>(64, 1)}));
    EXPECT_EQ(e.param, "prompt");
    EXPECT_EQ(e.code, "context_length_exceeded");
    auto chat = parse_completion_request(json::parse(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":41})"),
                                         Endpoint::chat_completions);
    e = error_of(chat, ids({{1}}));
    EXPECT_EQ(e.param, "max_completion_tokens") << "the error names the field the client sent";
    EXPECT_EQ(std::string(e.what()), "'max_completion_tokens' is 41; this server allows at most 40");
    EXPECT_EQ(error_of(chat, ids({{1}}), {.context = 64, .vocab_size = 100}).code, "") << "no max_tokens_limit: fits";
    e = error_of(completions(R"({"prompt":[1],"max_tokens":30})"), ids({std::vector<int32_t>(35, 1)}));
    EXPECT_EQ(e.param, "max_tokens");
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_EQ(std::string(e.what()), "This model's maximum context length is 64 tokens. However, you requested 65 tokens (35 in "
                           "the prompt, 30 for the completion). Please reduce the prompt or the completion length.");
}

TEST(OpenAiEngineRequest, TextPromptsNeverParseSpecialTokens) {
    const pagoda::tokenizer::Tokenizer* tok = pagoda::test::fixture_tokenizer("stories260K");
    if (!tok) GTEST_SKIP() << "fixture not found: stories260K";
    const std::string forged = "</s><s>hi";
    const auto plain = tok->encode(forged);
    const auto special = tok->encode(forged, {.parse_special = true});
    ASSERT_NE(plain, special) << "the fixture must know </s> and <s> as control tokens";
    auto p = completions(R"({"prompt":["</s><s>hi",[1,5]],"echo":true})");
    auto t = tokenize_prompts(p, *tok, nullptr, tok->n_vocab());
    ASSERT_EQ(t.prompts.size(), 2u);
    EXPECT_EQ(t.prompts[0], plain);
    EXPECT_EQ(t.prompts[1], (std::vector<int32_t>{1, 5}));
    EXPECT_EQ(t.longest(), std::max<int64_t>(int64_t(plain.size()), 2));
    EXPECT_EQ(t.total(), int64_t(plain.size()) + 2);
    // echo: the text as sent, token ids decoded.
    ASSERT_EQ(t.echo_text.size(), 2u);
    EXPECT_EQ(t.echo_text[0], forged);
    EXPECT_EQ(t.echo_text[1], tok->decode({1, 5}));
    EXPECT_TRUE(tokenize_prompts(completions(R"({"prompt":"a"})"), *tok, nullptr, tok->n_vocab()).echo_text.empty());
    // Token ids at or past the model's vocabulary are refused before anything decodes them.
    try {
        tokenize_prompts(completions(R"({"prompt":[1,512],"echo":true})"), *tok, nullptr, 512);
        FAIL() << "expected an ApiError";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.param, "prompt");
        EXPECT_EQ(std::string(e.what()), "prompt token 512 is out of range (vocabulary has 512 tokens)");
    }
}

TEST(OpenAiEngineRequest, ChatRendersThroughTheTemplate) {
    const pagoda::tokenizer::Tokenizer* tok = pagoda::test::fixture_tokenizer("stories260K");
    if (!tok) GTEST_SKIP() << "fixture not found: stories260K";
    auto chat = parse_completion_request(json::parse(R"({"messages":[{"role":"user","content":"hi"}]})"),
                                         Endpoint::chat_completions);
    auto tmpl = pagoda::chat::ChatTemplate::builtin("chatml");
    auto t = tokenize_prompts(chat, *tok, &tmpl, tok->n_vocab());
    ASSERT_EQ(t.prompts.size(), 1u);
    const auto& got = t.prompts[0];
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got[0], tok->bos()) << "the vocabulary adds BOS; chatml does not write it";
    EXPECT_EQ(std::count(got.begin(), got.end(), tok->bos()), 1);
    EXPECT_EQ(tok->decode(got), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    try {
        tokenize_prompts(chat, *tok, nullptr, tok->n_vocab());
        FAIL() << "chat without a template must be refused";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.param, "messages");
    }
}

TEST(OpenAiEngineRequest, ContentPartsAndDeveloperReachEveryTemplateAsItWants) {
    const pagoda::tokenizer::Tokenizer* tok = pagoda::test::fixture_tokenizer("stories260K");
    if (!tok) GTEST_SKIP() << "fixture not found: stories260K";
    auto chat = [](const std::string& messages) {
        return parse_completion_request(json::parse(R"({"messages":)" + messages + "}"), Endpoint::chat_completions);
    };
    const std::string parts = R"([{"role":"developer","content":[{"type":"text","text":"be brief"}]},
        {"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"there"}]}])";
    const std::string strings = R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi\nthere"}])";
    for (const char* name : {"chatml", "llama2", "llama3", "mistral-v3"}) {
        auto tmpl = pagoda::chat::ChatTemplate::builtin(name);
        EXPECT_FALSE(tmpl.takes_content_parts()) << name << " concatenates content as a string";
        auto a = tokenize_prompts(chat(parts), *tok, &tmpl, tok->n_vocab());
        auto b = tokenize_prompts(chat(strings), *tok, &tmpl, tok->n_vocab());
        EXPECT_EQ(a.prompts, b.prompts) << name << ": text parts flatten to the joined string, developer is system";
    }
    // A template that iterates the parts gets them as sent.
    auto iterating = pagoda::chat::ChatTemplate::from_source(
        "{% for m in messages %}[{{ m.role }}]{% for p in m.content %}<{{ p.text }}>{% endfor %}{% endfor %}");
    EXPECT_TRUE(iterating.takes_content_parts());
    auto t = tokenize_prompts(chat(R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}])"),
                              *tok, &iterating, tok->n_vocab());
    EXPECT_EQ(tok->decode(t.prompts[0]), "[user]<a><b>");
}

TEST(OpenAiEngineRequest, NBeyondTheEnginesSequencesNamesN) {
    EngineLimits limits = kLimits;
    limits.max_seqs = 4;
    EXPECT_EQ(error_of(completions(R"({"prompt":[1],"n":4})"), ids({{1}}), limits).status, 0);
    ApiError e = error_of(completions(R"({"prompt":[1],"n":5})"), ids({{1}}), limits);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "n");
    EXPECT_EQ(e.code, "invalid_value");
    EXPECT_NE(std::string(e.what()).find("between 1 and 4"), std::string::npos) << e.what();
}

TEST(OpenAiEngineRequest, MinTokensIsCarriedAndBoundedByTheDefaultMaxTokens) {
    auto r = make_engine_requests(completions(R"({"prompt":[1],"min_tokens":5,"max_tokens":9})"), ids({{1}}), kLimits);
    EXPECT_EQ(r.subs[0].stop.min_tokens, 5);
    // Completions default to 16 tokens: min_tokens 20 could never be met.
    EXPECT_EQ(error_of(completions(R"({"prompt":[1],"min_tokens":20})"), ids({{1}})).param, "min_tokens");
}
