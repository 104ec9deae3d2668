// Think, then answer in the schema: a scripted model that writes JSON inside its reasoning block
// and never closes it. With the reasoning prefix grammar and a thinking budget, every output has a
// closed block of exactly the budget's tokens and then a schema-valid answer; without a grammar the
// budget alone closes the block; a grammar's max_tokens rule closes it sooner when room runs out.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "chat/reasoning.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"
#include "grammar/json_schema.h"
#include "grammar/reasoning_prefix.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

using nlohmann::json;
using test::Driver;
using test::FakeStepModel;

std::shared_ptr<const tokenizer::Tokenizer> think_tokenizer() {
    tokenizer::VocabSpec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "<think>", "</think>"};
    s.token_types = {2, 3, 3, 4, 4};  // the tags are user-defined (whole) tokens
    for (char c = 33; c < 127; ++c) s.tokens.push_back(std::string(1, c));
    for (const char* piece : {"\xE2\x96\x81", "{\"", "\":", "\",", "\"}", "true", "12", "name", "id", "\n"})
        s.tokens.push_back(piece);
    s.token_types.resize(s.tokens.size(), 1);
    s.eos = 2;
    return tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(s));
}

const char* kSchema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},"id":{"type":"integer"}},
  "required":["name","id"],"additionalProperties":false})";

// The model: pseudo-random logits, a strong pull toward JSON pieces everywhere (it "answers inside
// its reasoning"), the closing tag and '<' nearly impossible (it never closes the block), and the
// opening tag first when the output has none yet.
FakeStepModel::LogitsFn stubborn_model(const tokenizer::Tokenizer& tok, size_t prompt_len) {
    const int32_t open = tok.vocab().find("<think>"), close = tok.vocab().find("</think>"), lt = tok.vocab().find("<");
    std::vector<int32_t> jsonish;
    for (const char* p : {"{\"", "\":", "\",", "\"}", "12", "name", "id", "}", "\""}) jsonish.push_back(tok.vocab().find(p));
    return [=](const std::vector<int32_t>& context, float* logits, int64_t vocab) {
        test::hashed_logits(context, logits, vocab);
        for (int32_t id : jsonish) logits[id] += 6.0f;
        logits[close] = -30.0f;
        logits[lt] = -30.0f;
        logits[open] = context.size() == prompt_len ? 40.0f : -30.0f;
    };
}

void expect_valid(const std::string& answer) {
    json v;
    try {
        v = json::parse(answer);
    } catch (const json::exception& e) {
        FAIL() << "not JSON: '" << answer << "': " << e.what();
    }
    ASSERT_TRUE(v.is_object()) << answer;
    ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << answer;
    EXPECT_LE(v["name"].get<std::string>().size(), 5u) << answer;
    ASSERT_TRUE(v.contains("id") && v["id"].is_number_integer()) << answer;
    EXPECT_EQ(v.size(), 2u) << answer;
}

constexpr size_t kPromptLen = 6;

Request think_request(uint32_t seed, bool starts_open, int64_t budget, int64_t max_tokens, bool with_grammar) {
    Request r;
    r.prompt = test::make_prompt(kPromptLen, seed, 60);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.stop.max_tokens = max_tokens;
    if (with_grammar)
        r.grammar = grammar::with_reasoning_prefix(*grammar::compile_json_schema(json::parse(kSchema)), {}, starts_open);
    r.thinking = ThinkingBudget{.starts_open = starts_open, .max_tokens = budget};
    return r;
}

// Where the closing tag's tokens start in `tokens` (npos: absent).
size_t find_close(const std::vector<int32_t>& tokens, const std::vector<int32_t>& close) {
    auto it = std::search(tokens.begin(), tokens.end(), close.begin(), close.end());
    return it == tokens.end() ? std::string::npos : size_t(it - tokens.begin());
}

struct ThinkSetup {
    std::shared_ptr<const tokenizer::Tokenizer> tok = think_tokenizer();
    FakeStepModel model{tok->n_vocab(), 1024, 16, 1 << 20, stubborn_model(*tok, kPromptLen)};
    std::vector<int32_t> close = tag_tokens(*tok, "</think>");
};

TEST(ThinkingBudget, SchemaAnswerAfterABlockOfExactlyTheBudget) {
    for (bool starts_open : {true, false}) {
        ThinkSetup s;
        ASSERT_FALSE(s.close.empty());
        EngineOptions options;
        options.scheduler = {.max_batched_tokens = 64, .max_seqs = 8};
        EngineCore core(s.model, s.tok, options);
        Driver driver(core);
        std::map<RequestId, int64_t> budgets;
        int json_in_reasoning = 0;
        for (uint32_t i = 0; i < 16; ++i) {
            const int64_t budget = 5 + 3 * int64_t(i);
            budgets[driver.add(think_request(i, starts_open, budget, 400, true))] = budget;
        }
        driver.run();
        ASSERT_EQ(driver.results.size(), 16u);
        for (const auto& [id, r] : driver.results) {
            const auto& c = r.choices.at(0);
            const int64_t budget = budgets.at(id);
            EXPECT_EQ(c.finish, FinishReason::stop) << c.text << c.error;
            // The block: the opening tag (unless the prompt opened it), the budget, the closing tag.
            const size_t at = find_close(c.tokens, s.close);
            ASSERT_NE(at, std::string::npos) << c.text;
            EXPECT_EQ(int64_t(at), budget + (starts_open ? 0 : 1)) << c.text;
            if (!starts_open) { EXPECT_EQ(c.tokens.at(0), s.tok->vocab().find("<think>")); }
            const auto parts = chat::split_reasoning(c.text, starts_open);
            json_in_reasoning += parts.reasoning.find("{\"") != std::string::npos;
            expect_valid(parts.content);
        }
        EXPECT_GE(json_in_reasoning, 12) << "the model should write JSON while it thinks";
    }
}

// No grammar: the budget alone closes the block, at exactly the budget; the output goes on freely.
TEST(ThinkingBudget, ClosesPlainOutputAtTheBudget) {
    for (int64_t budget : {0, 1, 7, 30}) {
        ThinkSetup s;
        EngineCore core(s.model, s.tok, {});
        Driver driver(core);
        const RequestId opened = driver.add(think_request(uint32_t(budget), true, budget, budget + int64_t(s.close.size()) + 5, false));
        driver.add(think_request(uint32_t(budget) + 100, false, budget, budget + int64_t(s.close.size()) + 6, false));
        driver.run();
        ASSERT_EQ(driver.results.size(), 2u);
        for (const auto& [id, r] : driver.results) {
            const auto& c = r.choices.at(0);
            const int64_t offset = id == opened ? 0 : 1;  // the other one writes the opening tag first
            ASSERT_GE(c.tokens.size(), size_t(budget + offset) + s.close.size()) << c.text;
            EXPECT_EQ(std::vector<int32_t>(c.tokens.begin() + budget + offset,
                                           c.tokens.begin() + budget + offset + int64_t(s.close.size())),
                      s.close)
                << "budget " << budget;
            EXPECT_EQ(find_close(c.tokens, s.close), size_t(budget + offset));
            EXPECT_EQ(c.tokens.size(), size_t(budget + offset) + s.close.size() + 5);  // then free text
        }
    }
}

// Choices forked from one prompt each keep their own count: every one closes at the budget.
TEST(ThinkingBudget, EveryForkedChoiceClosesAtTheBudget) {
    ThinkSetup s;
    EngineCore core(s.model, s.tok, {});
    Driver driver(core);
    Request r = think_request(9, true, 11, 200, true);
    r.n = 4;
    driver.add(r);
    driver.run();
    const auto& choices = driver.results.begin()->second.choices;
    ASSERT_EQ(choices.size(), 4u);
    std::set<std::string> distinct;
    for (const auto& [index, c] : choices) {
        EXPECT_EQ(find_close(c.tokens, s.close), 11u) << index << ": " << c.text;
        expect_valid(chat::split_reasoning(c.text, true).content);
        distinct.insert(c.text);
    }
    EXPECT_GT(distinct.size(), 1u);
}

// A model that closes its block itself before the budget is left alone.
TEST(ThinkingBudget, ABlockClosedByTheModelIsNotTouched) {
    auto tok = think_tokenizer();
    const int32_t close = tok->vocab().find("</think>");
    FakeStepModel model(tok->n_vocab(), 256, 16, 1 << 20, [&](const std::vector<int32_t>& ctx, float* l, int64_t v) {
        test::hashed_logits(ctx, l, v);
        l[close] = ctx.size() == kPromptLen + 3 ? 50.0f : -30.0f;
    });
    EngineCore core(model, tok, {});
    Driver driver(core);
    driver.add(think_request(1, true, 10, 20, false));
    driver.run();
    const auto& c = driver.results.begin()->second.choices.at(0);
    ASSERT_EQ(c.tokens.size(), 20u);
    EXPECT_EQ(c.tokens[3], close);
    EXPECT_EQ(std::count(c.tokens.begin(), c.tokens.end(), close), 1);
}

// max_tokens smaller than the budget: the grammar's rule that the output stays completable closes
// the block early enough for a whole answer, so every choice still ends on valid JSON.
TEST(ThinkingBudget, MaxTokensLeavesRoomForTheAnswer) {
    ThinkSetup s;
    EngineCore core(s.model, s.tok, {});
    Driver driver(core);
    for (uint32_t i = 0; i < 12; ++i) driver.add(think_request(50 + i, true, 1000, 30 + 4 * int64_t(i), true));
    driver.run();
    ASSERT_EQ(driver.results.size(), 12u);
    for (const auto& [id, r] : driver.results) {
        const auto& c = r.choices.at(0);
        EXPECT_EQ(c.finish, FinishReason::stop) << c.text;
        // The grammar may spell the tag in several tokens here: it is the text that must hold it.
        ASSERT_NE(c.text.find("</think>"), std::string::npos) << c.text;
        expect_valid(chat::split_reasoning(c.text, true).content);
    }
}

// The tag as the model writes it: one token where the vocabulary has it, else the longest pieces,
// and never the SentencePiece leading space (the encoder's answer here starts with it).
TEST(ThinkingBudget, TagTokensSpellTheTagExactly) {
    auto tok = think_tokenizer();
    EXPECT_EQ(tag_tokens(*tok, "</think>"), std::vector<int32_t>{tok->vocab().find("</think>")});
    tokenizer::VocabSpec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "</", "th", "ink", "<0x3E>"};  // '>' only as a byte token
    for (char c = 33; c < 127; ++c)
        if (c != '>') s.tokens.push_back(std::string(1, c));
    s.token_types.assign(s.tokens.size(), 1);
    s.token_types[0] = 2, s.token_types[1] = 3, s.token_types[2] = 3, s.token_types[7] = 6;
    s.add_space_prefix = true;
    auto spm = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(s));
    const auto ids = tag_tokens(*spm, "</think>");
    const auto& v = spm->vocab();
    EXPECT_EQ(ids, (std::vector<int32_t>{v.find("</"), v.find("th"), v.find("ink"), v.find("<0x3E>")}));
    std::string spelled;
    for (int32_t id : spm->encode("</think>", {.add_bos = false, .add_eos = false})) spelled += spm->token_to_piece(id);
    EXPECT_NE(spelled, "</think>") << "the encoder adds the leading space this avoids";
}

}  // namespace
}  // namespace pagoda::engine
