// Thinking budgets and the reasoning prefix at the API edge (server/reasoning_request.h): which field
// gives which budget, what is refused by name, and which grammars get the reasoning block in front.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/reasoning_request.h"

namespace pagoda::server {
namespace {

using nlohmann::json;

CompletionParams chat(json body) {
    body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    return parse_completion_request(body, Endpoint::chat_completions);
}

EngineRequests two_subs() {
    EngineRequests r;
    r.subs.resize(2);
    return r;
}

std::string refused_param(const std::function<void()>& f) {
    try {
        f();
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        return e.param;
    }
    return "(not refused)";
}

bool accepts(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
    grammar::Matcher m(g);
    return m.accept(text) && m.can_end();
}

TEST(ReasoningRequest, BudgetsFlag) {
    const ReasoningBudgets b = parse_reasoning_budgets("0,100,9000");
    EXPECT_EQ(b.low, 0);
    EXPECT_EQ(b.medium, 100);
    EXPECT_EQ(b.high, 9000);
    for (const char* bad : {"", "1,2", "1,2,3,4", "1,,3", "a,2,3", "1,2,-3", "1, 2,3", "1,2,3x", "1,2,99999999999"})
        EXPECT_THROW(parse_reasoning_budgets(bad), Error) << bad;
}

TEST(ReasoningRequest, FieldsGiveTheBudget) {
    const ReasoningSetup thinks{.template_thinks = true, .prompt_opens = true, .budgets = {10, 20, 30}};
    for (const auto& [body, budget] : std::vector<std::pair<json, int64_t>>{
             {{{"thinking_token_budget", 7}}, 7},
             {{{"max_thinking_tokens", 0}}, 0},
             {{{"reasoning_effort", "low"}}, 10},
             {{{"reasoning_effort", "medium"}}, 20},
             {{{"reasoning_effort", "high"}}, 30},
             {{{"reasoning_effort", "low"}, {"thinking_token_budget", 3}}, 3}}) {
        EngineRequests r = two_subs();
        apply_reasoning(chat(body), thinks, r);
        for (const auto& sub : r.subs) {
            ASSERT_TRUE(sub.thinking) << body;
            EXPECT_EQ(sub.thinking->max_tokens, budget) << body;
            EXPECT_TRUE(sub.thinking->starts_open);
            EXPECT_EQ(sub.thinking->close, "</think>");
            EXPECT_FALSE(sub.grammar);
        }
    }
    EngineRequests none = two_subs();
    apply_reasoning(chat(json::object()), thinks, none);
    EXPECT_FALSE(none.subs[0].thinking);
}

TEST(ReasoningRequest, RefusedByName) {
    EXPECT_EQ(refused_param([] { chat({{"thinking_token_budget", 1}, {"max_thinking_tokens", 1}}); }), "max_thinking_tokens");
    EXPECT_EQ(refused_param([] { chat({{"thinking_token_budget", -1}}); }), "thinking_token_budget");
    EXPECT_EQ(refused_param([] { chat({{"max_thinking_tokens", "5"}}); }), "max_thinking_tokens");
    EXPECT_EQ(refused_param([] { chat({{"reasoning_effort", "minimal"}}); }), "reasoning_effort");
    EXPECT_EQ(refused_param([] { chat({{"reasoning_effort", 2}}); }), "reasoning_effort");
    // A model that does not think cannot act on a budget.
    const ReasoningSetup plain{};
    for (const char* field : {"thinking_token_budget", "max_thinking_tokens"})
        EXPECT_EQ(refused_param([&] {
                      EngineRequests r = two_subs();
                      apply_reasoning(chat({{field, 5}}), plain, r);
                  }),
                  field);
    EXPECT_EQ(refused_param([&] {
                  EngineRequests r = two_subs();
                  apply_reasoning(chat({{"reasoning_effort", "high"}}), plain, r);
              }),
              "reasoning_effort");
}

TEST(ReasoningRequest, GrammarsGetTheBlockInFront) {
    const json format = {{"type", "json_object"}};
    for (bool opens : {false, true}) {
        EngineRequests r = two_subs();
        apply_reasoning(chat({{"response_format", format}}), {.template_thinks = true, .prompt_opens = opens}, r);
        ASSERT_TRUE(r.subs[0].grammar);
        EXPECT_EQ(r.subs[0].grammar, r.subs[1].grammar);  // one compiled grammar for all subs
        EXPECT_TRUE(accepts(r.subs[0].grammar, opens ? "hmm</think>\n{}" : "<think>hmm</think>\n{}"));
        EXPECT_EQ(accepts(r.subs[0].grammar, "{}"), !opens);
        EXPECT_FALSE(r.subs[0].thinking);  // no budget asked for
    }
    // No thinking template: the grammar is the request's own.
    CompletionParams p = chat({{"response_format", format}});
    EngineRequests r = two_subs();
    for (auto& s : r.subs) s.grammar = p.grammar;
    apply_reasoning(p, {}, r);
    EXPECT_EQ(r.subs[0].grammar, p.grammar);
    // A GBNF grammar that writes the tags itself already covers the thinking.
    CompletionParams g = chat({{"grammar", R"(root ::= "<think>" [a-z]+ "</think>" [a-z]+)"}});
    EXPECT_TRUE(g.grammar_spells_reasoning);
    EngineRequests rg = two_subs();
    for (auto& s : rg.subs) s.grammar = g.grammar;
    apply_reasoning(g, {.template_thinks = true}, rg);
    EXPECT_EQ(rg.subs[0].grammar, g.grammar);
    // One that does not gets the block like a schema.
    CompletionParams h = chat({{"grammar", R"(root ::= [a-z]+)"}});
    EXPECT_FALSE(h.grammar_spells_reasoning);
    EngineRequests rh = two_subs();
    apply_reasoning(h, {.template_thinks = true}, rh);
    EXPECT_TRUE(accepts(rh.subs[0].grammar, "<think>1 2 {</think>abc"));
}

TEST(ReasoningRequest, HarmonyBlockIsTheAnalysisChannelAndTheAnswerTheFinal) {
    const ReasoningSetup harmony{.template_thinks = true, .format = chat::ReasoningFormat::harmony, .budgets = {3, 6, 9}};
    EngineRequests r = two_subs();
    apply_reasoning(chat({{"response_format", {{"type", "json_object"}}}, {"reasoning_effort", "medium"}}), harmony, r);
    const auto& g = r.subs[0].grammar;
    ASSERT_TRUE(g);
    EXPECT_TRUE(accepts(g, "<|channel|>analysis<|message|>think {<|end|><|start|>assistant<|channel|>final<|message|>{}"));
    EXPECT_TRUE(accepts(g, "<|channel|>final<|message|>{\"a\": 1}"));
    EXPECT_FALSE(accepts(g, "{}"));  // the answer is the final channel's
    EXPECT_FALSE(accepts(g, "<|channel|>analysis<|message|>x<|end|>{}"));
    EXPECT_FALSE(accepts(g, "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>x"));
    ASSERT_TRUE(r.subs[0].thinking);
    EXPECT_EQ(r.subs[0].thinking->open, "<|channel|>analysis<|message|>");
    EXPECT_EQ(r.subs[0].thinking->close, "<|end|>");
    EXPECT_EQ(r.subs[0].thinking->max_tokens, 6);
    EXPECT_FALSE(r.subs[0].thinking->starts_open);

    // A forced tool call is a commentary message of its own, after the analysis or alone.
    const json tools = json::array({{{"type", "function"},
                                     {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
    CompletionParams t = chat({{"tools", tools}, {"tool_choice", "required"}});
    t.grammar = grammar::parse_gbnf(R"(root ::= "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>")");
    EngineRequests rt = two_subs();
    apply_reasoning(t, harmony, rt);
    EXPECT_TRUE(accepts(rt.subs[0].grammar, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>"));
    EXPECT_TRUE(accepts(rt.subs[0].grammar, "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary "
                                            "to=functions.f <|constrain|>json<|message|>{}<|call|>"));

    // A GBNF grammar that spells harmony's channels covers the whole output.
    CompletionParams spelled = chat({{"grammar", R"(root ::= "<|channel|>final<|message|>" [a-z]+)"}});
    EXPECT_TRUE(spelled.grammar_spells_reasoning);
}

TEST(ReasoningRequest, Gemma4BlockIsTheThoughtChannel) {
    const ReasoningSetup gemma4{.template_thinks = true, .format = chat::ReasoningFormat::gemma4, .budgets = {3, 6, 9}};
    EngineRequests r = two_subs();
    apply_reasoning(chat({{"response_format", {{"type", "json_object"}}}, {"reasoning_effort", "high"}}), gemma4, r);
    const auto& g = r.subs[0].grammar;
    ASSERT_TRUE(g);
    EXPECT_TRUE(accepts(g, "<|channel>thought\nthink {<channel|>\n{}"));
    EXPECT_TRUE(accepts(g, "{\"a\": 1}"));
    EXPECT_FALSE(accepts(g, "<think>x</think>{}"));
    EXPECT_FALSE(accepts(g, "<|channel>thought\nx<channel|>x"));
    ASSERT_TRUE(r.subs[0].thinking);
    EXPECT_EQ(r.subs[0].thinking->open, "<|channel>");
    EXPECT_EQ(r.subs[0].thinking->close, "<channel|>");
    EXPECT_EQ(r.subs[0].thinking->max_tokens, 9);
}

}  // namespace
}  // namespace pagoda::server
