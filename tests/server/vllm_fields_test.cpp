// vLLM's request fields mapped onto pagoda's machinery (issue 45 item 7): guided_choice,
// guided_regex and guided_grammar become grammars that admit exactly what vLLM's do;
// include_stop_str_in_output reaches the stop matcher; add_generation_prompt and
// continue_final_message shape the rendered chat prompt as transformers does.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "engine/stop_matcher.h"
#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/openai_engine_request.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

CompletionParams completions(const std::string& fields) {
    return parse_completion_request(json::parse(R"({"prompt":"x",)" + fields + "}"), Endpoint::completions);
}
CompletionParams chat(const std::string& messages, const std::string& fields = "") {
    return parse_completion_request(json::parse(R"({"messages":)" + messages + (fields.empty() ? "" : ",") + fields + "}"),
                                    Endpoint::chat_completions);
}
ApiError error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "no error", "");
}

bool accepts(const CompletionParams& p, std::string_view text) {
    pagoda::grammar::Matcher m(p.grammar);
    return m.accept(text) && m.can_end();
}

}  // namespace

TEST(VllmFields, GuidedChoiceAdmitsExactlyTheStrings) {
    const auto p = completions(R"("guided_choice":["yes","no","maybe \"so\"\n","né"])");
    ASSERT_NE(p.grammar, nullptr);
    for (const char* ok : {"yes", "no", "maybe \"so\"\n", "né"}) EXPECT_TRUE(accepts(p, ok)) << ok;
    for (const char* bad : {"", "ye", "yes ", "yesno", "maybe", "\"yes\"", "ne"}) EXPECT_FALSE(accepts(p, bad)) << bad;
    EXPECT_EQ(error_of([] { completions(R"("guided_choice":[])"); }).param, "guided_choice");
    EXPECT_EQ(error_of([] { completions(R"("guided_choice":"yes")"); }).code, "invalid_type");
    EXPECT_EQ(error_of([] { completions(R"("guided_choice":["a",3])"); }).param, "guided_choice[1]");
    EXPECT_EQ(error_of([] { completions(R"("guided_choice":["a",""])"); }).param, "guided_choice[1]");
}

TEST(VllmFields, GuidedRegexMatchesTheWholeRawText) {
    const auto p = completions(R"("guided_regex":"[A-Z][a-z]+ \\d{2,3}(\\.\\d)?")");
    ASSERT_NE(p.grammar, nullptr);
    for (const char* ok : {"Paris 75", "Lyon 690", "Nice 06.1"}) EXPECT_TRUE(accepts(p, ok)) << ok;
    for (const char* bad : {"paris 75", "Paris 7", "Paris 7500", "x Paris 75", "Paris 75 ", "Paris 75."})
        EXPECT_FALSE(accepts(p, bad)) << bad << ": the pattern must match the whole output";
    // Raw text, not a JSON string body: quotes and backslashes are themselves.
    const auto q = completions(R"("guided_regex":"\"[a-z]\\\\\"")");
    EXPECT_TRUE(accepts(q, "\"a\\\""));
    EXPECT_FALSE(accepts(q, "\\\"a\\\\\\\""));
    // Anchors are redundant; what the translator cannot enforce is refused by name.
    EXPECT_TRUE(accepts(completions(R"("guided_regex":"^ab$")"), "ab"));
    const auto e = error_of([] { completions(R"("guided_regex":"(a)\\1")"); });
    EXPECT_EQ(e.param, "guided_regex");
    EXPECT_EQ(e.code, "unsupported_parameter");
    EXPECT_NE(std::string(e.what()).find("backreference"), std::string::npos) << e.what();
}

TEST(VllmFields, GuidedGrammarIsGbnfAndOneGrammarFieldAtATime) {
    const auto p = completions(R"("guided_grammar":"root ::= \"a\" [0-9]+")");
    EXPECT_TRUE(accepts(p, "a42"));
    EXPECT_FALSE(accepts(p, "a"));
    EXPECT_EQ(error_of([] { completions(R"("guided_grammar":"root ::= (")"); }).param, "guided_grammar");
    for (const char* pair : {R"("guided_choice":["a"],"guided_regex":"a")", R"("guided_regex":"a","grammar":"root ::= \"a\"")",
                             R"("guided_json":{"type":"string"},"guided_choice":["a"])",
                             R"("response_format":{"type":"json_object"},"guided_grammar":"root ::= \"a\"")"}) {
        const auto e = error_of([&] { completions(pair); });
        EXPECT_EQ(e.status, 400) << pair;
        EXPECT_NE(std::string(e.what()).find("not several"), std::string::npos) << e.what();
    }
}

TEST(VllmFields, IncludeStopStrReachesTheEngineAndKeepsTheStop) {
    EXPECT_FALSE(completions(R"("stop":"END")").include_stop_str);
    const auto p = completions(R"("stop":["END"],"include_stop_str_in_output":true)");
    EXPECT_TRUE(p.include_stop_str);
    auto reqs = make_engine_requests(p, {.prompts = {{1, 2}}}, {.context = 64, .vocab_size = 100});
    EXPECT_TRUE(reqs.subs[0].stop.include_stop_str);
    EXPECT_EQ(error_of([] { completions(R"("include_stop_str_in_output":1)"); }).code, "invalid_type");

    // The matcher: the text ends with the stop string rather than before it, held tails alike.
    pagoda::engine::StopMatcher with({"END", "X"}, true), without({"END", "X"});
    std::string a, b;
    for (const char* piece : {"one E", "N", "D two"}) {
        auto ra = with.feed(piece);
        auto rb = without.feed(piece);
        a += ra.text;
        b += rb.text;
    }
    EXPECT_EQ(a, "one END");
    EXPECT_EQ(b, "one ");
    EXPECT_TRUE(with.stopped());
    EXPECT_EQ(with.matched(), "END");
}

TEST(VllmFields, PromptEndingFields) {
    const std::string conv = R"([{"role":"user","content":"hi"},{"role":"assistant","content":"Sure, "}])";
    EXPECT_TRUE(chat(conv).add_generation_prompt);
    EXPECT_FALSE(chat(conv).continue_final_message);
    const auto c = chat(conv, R"("continue_final_message":true)");
    EXPECT_TRUE(c.continue_final_message);
    EXPECT_FALSE(c.add_generation_prompt) << "continuing implies no generation prompt";
    EXPECT_FALSE(chat(conv, R"("add_generation_prompt":false)").add_generation_prompt);
    auto e = error_of([&] { chat(conv, R"("continue_final_message":true,"add_generation_prompt":true)"); });
    EXPECT_EQ(e.param, "add_generation_prompt");
    e = error_of([] { chat(R"([{"role":"user","content":"hi"}])", R"("continue_final_message":true)"); });
    EXPECT_EQ(e.param, "continue_final_message");
    EXPECT_NE(std::string(e.what()).find("assistant"), std::string::npos) << e.what();
}

TEST(VllmFields, ContinueFinalMessageCutsAfterTheAssistantText) {
    const pagoda::tokenizer::Tokenizer* tok = pagoda::test::fixture_tokenizer("stories260K");
    if (!tok) GTEST_SKIP() << "fixture not found: stories260K";
    auto tmpl = pagoda::chat::ChatTemplate::builtin("chatml");
    auto text = [&](const CompletionParams& p) { return tok->decode(tokenize_prompts(p, *tok, &tmpl, tok->n_vocab()).prompts[0]); };
    const std::string conv = R"([{"role":"user","content":"hi"},{"role":"assistant","content":"Sure, "}])";
    // Closed and a new turn opened (the default), closed only, or continued (the trailing space kept,
    // as chatml keeps it).
    EXPECT_EQ(text(chat(conv)), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nSure, <|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(text(chat(conv, R"("add_generation_prompt":false)")),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nSure, <|im_end|>\n");
    EXPECT_EQ(text(chat(conv, R"("continue_final_message":true)")), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nSure, ");
    // Content parts: the last text part is what is continued.
    EXPECT_EQ(text(chat(R"([{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"A"},
        {"type":"text","text":"B"}]}])",
                        R"("continue_final_message":true)")),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nA\nB");
}

TEST(VllmFields, ContinueFinalMessageWhereTheTemplateTrimsTheContent) {
    // A template that strips the content (as Llama 3's does): the cut follows the trimmed text.
    auto trimming = pagoda::chat::ChatTemplate::from_source(
        "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}");
    pagoda::chat::ChatRenderOptions o;
    o.add_generation_prompt = false;
    o.continue_final_message = true;
    const json conv = json::parse(R"([{"role":"user","content":"hi"},{"role":"assistant","content":"  Sure, "}])");
    EXPECT_EQ(trimming.render(conv, o), "<user>hi</user><assistant>Sure,");
    // The same text earlier in the conversation does not mislead the cut: the last occurrence counts.
    const json echo = json::parse(R"([{"role":"user","content":"ok"},{"role":"assistant","content":"ok"}])");
    EXPECT_EQ(trimming.render(echo, o), "<user>ok</user><assistant>ok");
    // A template that does not write the content cannot be continued.
    auto silent = pagoda::chat::ChatTemplate::from_source("{% for m in messages %}[{{ m.role }}]{% endfor %}");
    EXPECT_THROW(silent.render(conv, o), pagoda::Error);
    o.add_generation_prompt = true;
    EXPECT_THROW(trimming.render(conv, o), pagoda::Error);
}
