// Thinking and structured output together, for a chat request to a model whose template thinks:
//   - a grammar (response_format, grammar, a forced tool call) gets an optional reasoning block in
//     front (grammar/reasoning_prefix.h) — required and already open when the rendered prompt ends
//     with <think> — so the model may think freely and the grammar holds only the answer (a GBNF
//     `grammar` that spells the tags itself already covers the thinking and is left as it is);
//   - a thinking budget (engine/thinking_budget.h) from thinking_token_budget (vLLM's name; alias
//     max_thinking_tokens), else reasoning_effort through the server's low/medium/high budgets.
// A budget on a model that does not think, or on a completions request, is refused (400 naming the
// field): it could not be acted on.
#pragma once
#include <cstdint>
#include <string>

#include "chat/reasoning.h"
#include "engine/thinking_budget.h"
#include "grammar/reasoning_prefix.h"
#include "server/openai_engine_request.h"
#include "server/openai_request.h"

namespace pagoda::server {

struct ReasoningBudgets {
    int64_t low = 512, medium = 2048, high = 8192;
};

// "LOW,MEDIUM,HIGH" (three non-negative token counts) -> budgets; pagoda::Error naming the problem.
ReasoningBudgets parse_reasoning_budgets(const std::string& text);

struct ReasoningSetup {
    bool template_thinks = false;  // the server splits reasoning for this model
    bool prompt_opens = false;     // this request's rendered prompt ends inside the block
    // The block's tags: <think>…</think>, or harmony's analysis message then the final channel's
    // header before the answer (`<|channel|>analysis<|message|>…<|end|><|start|>assistant
    // <|channel|>final<|message|>ANSWER`, or `<|channel|>final<|message|>ANSWER` without thinking);
    // a harmony budget forces <|end|>, after which the model (or the grammar) opens the answer.
    chat::ReasoningFormat format = chat::ReasoningFormat::deepseek;
    ReasoningBudgets budgets;
};

// The grammar tags and the budget's tags of a reasoning format (deepseek's for none).
// tool_call: the grammar writes a forced tool call (harmony: its own message, no final channel).
grammar::ReasoningTags reasoning_grammar_tags(chat::ReasoningFormat format, bool tool_call);
engine::ThinkingBudget reasoning_budget_tags(chat::ReasoningFormat format);

// Sets every sub-request's grammar prefix and thinking budget; throws ApiError.
void apply_reasoning(const CompletionParams& p, const ReasoningSetup& setup, EngineRequests& requests);

}  // namespace pagoda::server
