// Constrained decoding in the engine: a FakeStepModel with pseudo-random logits over a small
// JSON-friendly vocabulary, requests with a JSON-schema grammar. Every finished output must parse and
// satisfy the schema — alone, batched, with n > 1, under preemption — and logprobs are those of the
// masked distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

using nlohmann::json;
using test::Driver;
using test::FakeStepModel;

// A SentencePiece vocabulary: every printable ASCII character, some multi-character JSON pieces,
// and a control token nothing can spell.
std::shared_ptr<const tokenizer::Tokenizer> json_tokenizer() {
    tokenizer::VocabSpec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "<tool>"};
    s.token_types = {2, 3, 3, 3};
    for (char c = 33; c < 127; ++c) s.tokens.push_back(std::string(1, c));
    for (const char* piece : {"\xE2\x96\x81", "{\"", "\":", "\",", "\"}", "true", "false", "null", "12", "00", "ab",
                              "\xE2\x96\x81\"", "]}", "[{", "\xE2\x96\x81{", "name", "id", "\":\xE2\x96\x81\"", "\n"})
        s.tokens.push_back(piece);
    s.token_types.resize(s.tokens.size(), 1);
    s.eos = 2;
    return tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(s));
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 6},
    "id": {"type": "integer"},
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", null]}, "maxItems": 3},
    "kind": {"anyOf": [{"const": "x"}, {"type": "null"}]}
  },
  "required": ["name", "id"],
  "additionalProperties": false
})";

void expect_valid(const std::string& text) {
    json v;
    try {
        v = json::parse(text);
    } catch (const json::exception& e) {
        FAIL() << "not JSON: '" << text << "': " << e.what();
    }
    ASSERT_TRUE(v.is_object()) << text;
    ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << text;
    // maxLength counts characters (code points), not UTF-8 bytes: a \uXXXX escape is one.
    const std::string name = v["name"].get<std::string>();
    size_t chars = 0;
    for (unsigned char c : name) chars += (c & 0xC0) != 0x80;
    EXPECT_LE(chars, 6u) << text;
    ASSERT_TRUE(v.contains("id") && v["id"].is_number_integer()) << text;
    for (auto it = v.begin(); it != v.end(); ++it)
        EXPECT_TRUE(it.key() == "name" || it.key() == "id" || it.key() == "ok" || it.key() == "tags" || it.key() == "kind")
            << text;
    if (v.contains("ok")) {
        EXPECT_TRUE(v["ok"].is_boolean()) << text;
    }
    if (v.contains("tags")) {
        EXPECT_LE(v["tags"].size(), 3u) << text;
        for (const auto& t : v["tags"]) EXPECT_TRUE(t.is_null() || t == "a" || t == "b") << text;
    }
    if (v.contains("kind")) {
        EXPECT_TRUE(v["kind"].is_null() || v["kind"] == "x") << text;
    }
}

Request schema_request(uint32_t seed, int32_t n = 1) {
    Request r;
    r.prompt = test::make_prompt(5 + seed % 4, seed, 60);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.stop.max_tokens = 400;
    r.n = n;
    r.grammar = grammar::compile_json_schema(json::parse(kSchema));
    return r;
}

void expect_all_valid(const Driver& driver, size_t requests, int32_t n) {
    ASSERT_EQ(driver.results.size(), requests);
    for (const auto& [id, r] : driver.results) {
        ASSERT_TRUE(r.done);
        ASSERT_EQ(r.choices.size(), size_t(n));
        for (const auto& [index, c] : r.choices) {
            EXPECT_EQ(c.finish, FinishReason::stop) << "request " << id << " choice " << index << ": " << c.text << c.error;
            expect_valid(c.text);
        }
    }
}

TEST(GrammarEngine, EveryOutputValidatesWhileBatched) {
    auto tok = json_tokenizer();
    FakeStepModel model(tok->n_vocab() + 3, 512, 16);  // a model vocabulary larger than the tokenizer's
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 64, .max_seqs = 8};
    EngineCore core(model, tok, options);
    Driver driver(core);
    for (uint32_t i = 0; i < 24; ++i) driver.add(schema_request(i));
    driver.run();
    expect_all_valid(driver, 24, 1);
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
}

// The mask comes before every sampling step: biases, penalties and truncations only ever choose
// among allowed tokens (a +50 bias on a token the grammar forbids does not bring it back).
TEST(GrammarEngine, SamplingParametersPickOnlyAllowedTokens) {
    auto tok = json_tokenizer();
    FakeStepModel model(tok->n_vocab(), 512, 16);
    EngineCore core(model, tok, {});
    Driver driver(core);
    for (uint32_t i = 0; i < 12; ++i) {
        Request r = schema_request(300 + i);
        r.sampling.top_k = int32_t(1 + i % 6);
        r.sampling.top_p = 0.5f + 0.04f * float(i);
        r.sampling.min_p = i % 3 == 0 ? 0.05f : 0.0f;
        r.sampling.presence_penalty = 1.5f;
        r.sampling.frequency_penalty = 0.5f;
        r.sampling.repetition_penalty = 1.2f;
        r.sampling.logit_bias = {{tok->vocab().find("x"), 50.0f}, {tok->vocab().find("}"), -5.0f}};
        r.logprobs = 2;
        driver.add(r);
    }
    driver.run();
    expect_all_valid(driver, 12, 1);
}

TEST(GrammarEngine, ForkedChoicesEachFollowTheGrammar) {
    auto tok = json_tokenizer();
    FakeStepModel model(tok->n_vocab(), 512, 16);
    EngineCore core(model, tok, {});
    Driver driver(core);
    for (uint32_t i = 0; i < 3; ++i) driver.add(schema_request(100 + i, 5));
    driver.run();
    expect_all_valid(driver, 3, 5);
    std::set<std::string> distinct;
    for (const auto& [index, c] : driver.results.begin()->second.choices) distinct.insert(c.text);
    EXPECT_GT(distinct.size(), 1u);
}

TEST(GrammarEngine, PreemptedSequencesKeepTheirGrammarState) {
    auto tok = json_tokenizer();
    auto run = [&](int32_t n_blocks, int64_t* preemptions) {
        FakeStepModel model(tok->n_vocab(), n_blocks, 4);
        EngineOptions options;
        options.scheduler = {.max_batched_tokens = 16, .max_seqs = 6};
        EngineCore core(model, tok, options);
        Driver driver(core);
        for (uint32_t i = 0; i < 8; ++i) {
            Request r = schema_request(200 + i);
            r.sampling.temperature = 0;  // greedy: the tokens must not depend on preemption
            r.sampling.repetition_penalty = 1.3f;
            driver.add(r);
        }
        driver.run();
        *preemptions = core.stats().preemptions;
        expect_all_valid(driver, 8, 1);
        std::vector<std::string> texts;
        for (const auto& [id, r] : driver.results) texts.push_back(r.choices.at(0).text);
        return texts;
    };
    int64_t preempted = 0, roomy = 0;
    const auto tight = run(40, &preempted);
    const auto alone = run(4096, &roomy);
    EXPECT_GT(preempted, 0);
    EXPECT_EQ(roomy, 0);
    EXPECT_EQ(tight, alone);
}

// JSON mode with small max_tokens: the budget-aware mask closes every object in time, so each
// output parses even when it ends on max_tokens.
TEST(GrammarEngine, JsonModeAlwaysParsesWithinMaxTokens) {
    auto tok = json_tokenizer();
    FakeStepModel model(tok->n_vocab(), 512, 16);
    EngineCore core(model, tok, {});
    Driver driver(core);
    for (uint32_t i = 0; i < 40; ++i) {
        Request r;
        r.prompt = test::make_prompt(4, i, 60);
        r.sampling.temperature = 1.0f;
        r.sampling.seed = i;
        r.stop.max_tokens = 2 + i;
        r.grammar = grammar::json_object_grammar();
        driver.add(r);
    }
    driver.run();
    for (const auto& [id, r] : driver.results) {
        const auto& c = r.choices.at(0);
        EXPECT_LE(int64_t(c.tokens.size()), int64_t(id) + 1);
        json v;
        EXPECT_NO_THROW(v = json::parse(c.text)) << c.text;
        EXPECT_TRUE(v.is_object()) << c.text;
    }
}

TEST(GrammarEngine, EndTokensOnlyWhereTheGrammarMayEndAndLogprobsAreMasked) {
    auto tok = json_tokenizer();
    FakeStepModel model(tok->n_vocab(), 64, 16);
    EngineCore core(model, tok, {});
    Driver driver(core);
    Request r;
    r.prompt = {5, 6, 7};
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 9;
    r.logprobs = 5;
    r.stop.max_tokens = 50;
    r.grammar = grammar::parse_gbnf("root ::= [a-c]{1,4} | \"name\" \"!\"?");
    std::vector<RequestId> ids;
    for (uint64_t seed = 0; seed < 20; ++seed) {
        r.sampling.seed = seed;
        ids.push_back(driver.add(r));
    }
    driver.run();
    for (RequestId id : ids) {
        const auto& c = driver.results[id].choices.at(0);
        EXPECT_EQ(c.finish, FinishReason::stop);
        auto g = grammar::parse_gbnf("root ::= [a-c]{1,4} | \"name\" \"!\"?");
        grammar::Matcher m(g);
        EXPECT_TRUE(m.accept(c.text) && m.can_end()) << c.text;
        for (const auto& lp : c.logprobs) {
            EXPECT_TRUE(std::isfinite(lp.logprob));
            for (const auto& [token, value] : lp.top) EXPECT_TRUE(std::isfinite(value));
            double mass = 0;
            for (const auto& [token, value] : lp.top) mass += std::exp(double(value));
            EXPECT_LE(mass, 1.0 + 1e-6);
        }
    }
}

TEST(GrammarEngine, AGrammarNoTokenCanSpellFailsThatChoiceOnly) {
    auto tok = json_tokenizer();
    FakeStepModel model(tok->n_vocab(), 64, 16);
    EngineCore core(model, tok, {});
    Driver driver(core);
    Request bad = test::greedy_request({5, 6}, 10);
    bad.grammar = grammar::parse_gbnf("root ::= \"a\" \"\\u00e9\"");
    const RequestId b = driver.add(bad);
    const RequestId ok = driver.add(test::greedy_request({5, 6}, 3));
    driver.run();
    EXPECT_EQ(driver.results[b].choices.at(0).finish, FinishReason::error);
    EXPECT_EQ(driver.results[b].choices.at(0).text, "a");
    EXPECT_NE(driver.results[b].choices.at(0).error.find("grammar allows no token"), std::string::npos);
    EXPECT_EQ(driver.results[ok].choices.at(0).finish, FinishReason::length);
}

TEST(GrammarEngine, AGrammarNeedsATokenizer) {
    FakeStepModel model(50, 64, 16);
    EngineCore core(model, nullptr, {});
    Request r = test::greedy_request({5, 6}, 10);
    r.grammar = grammar::parse_gbnf("root ::= \"a\"");
    EXPECT_THROW(core.validate(r), Error);
}

}  // namespace
}  // namespace pagoda::engine
