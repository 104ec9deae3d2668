// Fill-in-the-middle: the vocabulary's FIM tokens (GGUF keys, the older key names, and the texts
// llama.cpp's loader recognises), and the prompt llama-server's /infill rule builds from them —
// PSM and SPM order, repository context with and without <|repo_name|>/<|file_sep|>, BOS, and the
// prefix/suffix/extra budget — as hand-written id sequences; the 400 for a vocabulary without them;
// /infill and `suffix` request parsing.
#include "server/fim_prompt.h"

#include <filesystem>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "server/api_error.h"
#include "server/openai_engine_request.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

constexpr int32_t PRE = 900, SUF = 901, MID = 902, PAD = 903, REP = 904, SEP = 905, BOS = 1;

// A stand-in encoder: one id per byte (its value), so expected sequences can be written by hand.
std::vector<int32_t> bytes(std::string_view text) { return {text.begin(), text.end()}; }
const TextEncoder kEncode = [](std::string_view text) { return bytes(text); };

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

FimVocab qwen_like(bool add_bos = true) {
    FimVocab v;
    v.tokens = {.prefix = PRE, .suffix = SUF, .middle = MID, .pad = PAD, .repo = REP, .file_sep = SEP};
    v.bos = BOS;
    v.add_bos = add_bos;
    return v;
}

const FimBudget kRoomy{.n_batch = 2048, .n_ctx = 4096, .n_predict = 16};

}  // namespace

TEST(FimPrompt, PsmWithRepositoryContext) {
    const std::vector<FimChunk> extra = {{"a.py", "x=1\n"}, {"b.py", "y"}};
    const auto got = assemble_infill(qwen_like(), kEncode, bytes("def f("), bytes("):\n"), extra, bytes("n"), kRoomy, false);
    const std::vector<int32_t> want = cat({{REP}, bytes("myproject\n"),
                                           {SEP}, bytes("a.py\n"), bytes("x=1\n"),
                                           {SEP}, bytes("b.py\n"), bytes("y"),
                                           {SEP}, bytes("filename\n"),
                                           {BOS, PRE}, bytes("def f(n"), {SUF}, bytes("):\n"), {MID}});
    EXPECT_EQ(got, want);
}

TEST(FimPrompt, SpmPutsTheSuffixFirst) {
    const auto got = assemble_infill(qwen_like(), kEncode, bytes("ab"), bytes("cd"), {}, bytes("p"), kRoomy, true);
    const std::vector<int32_t> want = cat({{REP}, bytes("myproject\n"), {SEP}, bytes("filename\n"),
                                           {BOS, SUF}, bytes("cd"), {PRE}, bytes("abp"), {MID}});
    EXPECT_EQ(got, want);
}

TEST(FimPrompt, WithoutRepoTokensChunksGetTheSnippetLineAndNoBosUnlessAdded) {
    FimVocab v;  // StarCoder-like: prefix/suffix/middle only, no BOS added
    v.tokens = {.prefix = PRE, .suffix = SUF, .middle = MID};
    v.bos = BOS;
    const auto got = assemble_infill(v, kEncode, bytes("a"), bytes("b"), {{"ignored.c", "int x;"}}, {}, kRoomy, false);
    const std::vector<int32_t> want = cat({bytes("\n\n--- snippet ---\n\n"), bytes("int x;"), {PRE, 'a', SUF, 'b', MID}});
    EXPECT_EQ(got, want);
    // Nothing extra at all: just the three tokens around the texts.
    EXPECT_EQ(assemble_infill(v, kEncode, bytes("a"), bytes("b"), {}, {}, kRoomy, false),
              (std::vector<int32_t>{PRE, 'a', SUF, 'b', MID}));
}

TEST(FimPrompt, BudgetKeepsThePrefixEndTheSuffixStartAndTheExtraEnd) {
    // n_batch 16: the prefix keeps its last 12 tokens, the suffix its first 4 - (2 + |prompt|) = 1
    // (prompt "p"); the extra context its last 30 - 16 - 2*4 = 6 tokens.
    const FimBudget tight{.n_batch = 16, .n_ctx = 30, .n_predict = 4};
    const auto got = assemble_infill(qwen_like(false), kEncode, bytes("abcdefghijklmnop"), bytes("qrstuv"), {},
                                     bytes("p"), tight, false);
    const std::vector<int32_t> want = cat({bytes("ename\n") /* the end of <SEP>"filename\n" */ , {PRE},
                                           bytes("efghijklmnop"), bytes("p"), {SUF}, bytes("q"), {MID}});
    // "ename\n" is 6 tokens: e n a m e \n.
    EXPECT_EQ(got, want);
    // A prompt that fills the suffix's share leaves the suffix nothing (never a negative count), and a
    // context with no room beyond the batch leaves out the extra context.
    const FimBudget no_room{.n_batch = 16, .n_ctx = 16, .n_predict = 4};
    EXPECT_EQ(assemble_infill(qwen_like(false), kEncode, bytes("ab"), bytes("cd"), {{"f", "t"}}, bytes("pqr"), no_room, false),
              cat({{PRE}, bytes("abpqr"), {SUF, MID}}));
}

// ---- the vocabulary's FIM tokens ----

namespace {

tokenizer::VocabSpec spm_spec(std::vector<std::string> extra_tokens) {
    tokenizer::VocabSpec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "a"};
    for (auto& t : extra_tokens) s.tokens.push_back(std::move(t));
    return s;
}

}  // namespace

TEST(FimVocab, FoundByTextForEachFamilyAndMadeControl) {
    struct Family {
        std::vector<std::string> texts;  // prefix, suffix, middle, then optional pad/repo/sep
    };
    const std::vector<Family> families = {
        {{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}},
        {{"<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", "<reponame>"}},
        {{"<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
          "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>"}},
        {{"\xE2\x96\x81<PRE>", "\xE2\x96\x81<SUF>", "\xE2\x96\x81<MID>"}},  // CodeLlama
    };
    for (const auto& f : families) {
        const auto v = tokenizer::Vocab::from_spec(spm_spec(f.texts));
        const tokenizer::FimTokens& t = v.fim();
        EXPECT_TRUE(t.usable()) << f.texts[0];
        EXPECT_EQ(t.prefix, 4) << f.texts[0];
        EXPECT_EQ(t.suffix, 5);
        EXPECT_EQ(t.middle, 6);
        EXPECT_EQ(t.pad, f.texts.size() > 3 ? 7 : tokenizer::kNoToken);
        EXPECT_EQ(t.repo, f.texts.size() > 4 ? 8 : tokenizer::kNoToken);
        EXPECT_EQ(t.file_sep, f.texts.size() > 5 ? 9 : tokenizer::kNoToken);
        for (int32_t id = 4; id < v.n_tokens(); ++id) EXPECT_TRUE(v.is_control(id)) << v.text(id);
        // pad, repo and file separator end generation (llama.cpp's rule); the three others do not.
        for (int32_t id : {t.pad, t.repo, t.file_sep})
            if (id != tokenizer::kNoToken) { EXPECT_TRUE(v.is_eog(id)) << v.text(id); }
        EXPECT_FALSE(v.is_eog(t.middle));
    }
    EXPECT_FALSE(tokenizer::Vocab::from_spec(spm_spec({"<|fim_prefix|>", "<|fim_suffix|>"})).fim().usable());
}

TEST(FimVocab, GgufKeysWinOverTextsAndTheOlderKeyNamesAreRead) {
    auto spec = spm_spec({"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "x", "y", "z"});
    spec.fim_pre = 7;
    spec.fim_suf = 8;
    spec.fim_mid = 9;
    spec.fim_pad = -1;  // "none", not "look for it"
    const auto v = tokenizer::Vocab::from_spec(spec);
    EXPECT_EQ(v.fim().prefix, 7);
    EXPECT_EQ(v.fim().suffix, 8);
    EXPECT_EQ(v.fim().middle, 9);
    spec.fim_pre = 99;
    EXPECT_THROW(tokenizer::Vocab::from_spec(spec), Error) << "an id past the vocabulary";

    gguf::Writer w;
    w.set("tokenizer.ggml.model", gguf::Value::string("llama"));
    w.set("tokenizer.ggml.tokens", gguf::Value::strings({"<unk>", "<s>", "</s>", "p", "s", "m"}));
    w.set("tokenizer.ggml.prefix_token_id", gguf::Value::u32(3));
    w.set("tokenizer.ggml.suffix_token_id", gguf::Value::u32(4));
    w.set("tokenizer.ggml.middle_token_id", gguf::Value::u32(5));
    const std::string path = test::temp_path("fim-old-keys.gguf");
    w.write(path);
    auto file = gguf::File::open(path);
    const auto old = tokenizer::Vocab::from_gguf(*file);
    std::filesystem::remove(path);
    EXPECT_EQ(old.fim().prefix, 3);
    EXPECT_EQ(old.fim().suffix, 4);
    EXPECT_EQ(old.fim().middle, 5);
}

TEST(FimVocab, DeepSeekCoderFixtureHasItsFimTokens) {
    const tokenizer::Tokenizer* tok = test::fixture_tokenizer("deepseek-coder");
    if (!tok) GTEST_SKIP() << "fixture vocabulary deepseek-coder is absent";
    const auto& v = tok->vocab();
    EXPECT_EQ(v.fim().prefix, v.find("<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>"));
    EXPECT_EQ(v.fim().suffix, v.find("<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>"));
    EXPECT_EQ(v.fim().middle, v.find("<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>"));
    EXPECT_TRUE(v.fim().usable());
}

// ---- requests ----

namespace {

ApiError infill_error(const json& body) {
    try {
        parse_infill_request(body);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "no error", "");
}

}  // namespace

TEST(FimRequest, InfillFieldsParse) {
    const auto p = parse_infill_request(json::parse(R"({"input_prefix":"def f(","input_suffix":"):",
        "input_extra":[{"filename":"a.py","text":"x"},{"text":"y"}],"prompt":"n","max_tokens":5,"temperature":0,
        "stream":true})"));
    ASSERT_TRUE(p.fim);
    EXPECT_TRUE(p.fim->infill);
    EXPECT_EQ(p.fim->prefix, "def f(");
    EXPECT_EQ(p.fim->suffix, "):");
    ASSERT_EQ(p.fim->extra.size(), 2u);
    EXPECT_EQ(p.fim->extra[0].filename, "a.py");
    EXPECT_EQ(p.fim->extra[1].filename, "tmp");  // llama-server's default name
    EXPECT_EQ(p.fim->extra[1].text, "y");
    ASSERT_EQ(p.prompts.size(), 1u);
    EXPECT_EQ(std::get<std::string>(p.prompts[0]), "n");
    EXPECT_EQ(p.endpoint, Endpoint::completions);
    EXPECT_TRUE(p.stream);
    EXPECT_EQ(*p.max_tokens, 5);
    // Everything may be absent: an empty hole.
    EXPECT_TRUE(parse_infill_request(json::object()).fim);
}

TEST(FimRequest, InfillRefusals) {
    EXPECT_EQ(infill_error(json::parse(R"({"input_prefix":3})")).param, "input_prefix");
    EXPECT_EQ(infill_error(json::parse(R"({"input_extra":{}})")).param, "input_extra");
    EXPECT_EQ(infill_error(json::parse(R"({"input_extra":[{"filename":"a"}]})")).param, "input_extra[0].text");
    EXPECT_EQ(infill_error(json::parse(R"({"input_extra":[{"text":"a","lang":"c"}]})")).param, "input_extra[0].lang");
    EXPECT_EQ(infill_error(json::parse(R"({"input_extra":["a"]})")).param, "input_extra[0]");
    EXPECT_EQ(infill_error(json::parse(R"({"prompt":["a"]})")).param, "prompt");
    EXPECT_EQ(infill_error(json::parse(R"({"suffix":"a"})")).param, "suffix");
    EXPECT_EQ(infill_error(json::parse(R"({"echo":true})")).param, "echo");
    EXPECT_EQ(infill_error(json::parse(R"({"bogus":1})")).param, "bogus");
    EXPECT_EQ(infill_error(json::parse(R"({"temperature":9})")).param, "temperature");
    EXPECT_EQ(infill_error(json::array()).status, 400);
}

TEST(FimRequest, CompletionsSuffix) {
    auto p = parse_completion_request(json::parse(R"({"prompt":"ab","suffix":"cd"})"), Endpoint::completions);
    ASSERT_TRUE(p.fim);
    EXPECT_FALSE(p.fim->infill);
    EXPECT_EQ(p.fim->suffix, "cd");
    EXPECT_FALSE(parse_completion_request(json::parse(R"({"prompt":"ab","suffix":""})"), Endpoint::completions).fim);
    try {
        parse_completion_request(json::parse(R"({"prompt":"ab","suffix":"cd","echo":true})"), Endpoint::completions);
        FAIL() << "echo with suffix was accepted";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.param, "echo");
    }
}

// Through tokenize_prompts with a real SentencePiece vocabulary: the pieces are the tokenizer's
// encodings without BOS, the structure is the rule's, and a vocabulary without FIM tokens is a 400.
TEST(FimRequest, TokenizePromptsAssemblesWithTheModelsTokens) {
    auto spec = spm_spec({"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "\xE2\x96\x81" "a", "b"});
    auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(spec));
    const int32_t space_a = tok->vocab().find("\xE2\x96\x81" "a");
    auto p = parse_completion_request(json::parse(R"({"prompt":"a","suffix":"b"})"), Endpoint::completions);
    auto prompts = tokenize_prompts(p, *tok, nullptr, tok->n_vocab());
    // SentencePiece's dummy space prefix applies to each piece; BOS (added by default) comes first.
    const std::vector<int32_t> b = tok->encode("b", {.add_bos = false});  // "▁b": <unk> for the space, then b
    ASSERT_EQ(b, (std::vector<int32_t>{0, 8}));
    EXPECT_EQ(prompts.prompts.at(0), (std::vector<int32_t>{1, 4, space_a, 5, 0, 8, 6}));
    // Token ids as the prefix, SPM order.
    auto ids = parse_completion_request(json::parse(R"({"prompt":[3,3],"suffix":"b"})"), Endpoint::completions);
    EXPECT_EQ(tokenize_prompts(ids, *tok, nullptr, tok->n_vocab(), {.spm = true}).prompts.at(0),
              (std::vector<int32_t>{1, 5, 0, 8, 4, 3, 3, 6}));

    auto plain = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(spm_spec({"b"})));
    try {
        tokenize_prompts(p, *plain, nullptr, plain->n_vocab());
        FAIL() << "a vocabulary without FIM tokens was accepted";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "fim_not_supported");
        EXPECT_EQ(e.param, "suffix");
        EXPECT_NE(std::string(e.what()).find("no FIM prefix/suffix/middle tokens"), std::string::npos) << e.what();
    }
    auto infill = parse_infill_request(json::parse(R"({"input_prefix":"a"})"));
    try {
        tokenize_prompts(infill, *plain, nullptr, plain->n_vocab());
        FAIL();
    } catch (const ApiError& e) {
        EXPECT_EQ(e.param, "input_suffix");
    }
}
