#include "server/reasoning_request.h"

#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "grammar/grammar_cache.h"
#include "grammar/reasoning_prefix.h"
#include "server/api_error.h"

namespace pagoda::server {
namespace {

const char* budget_field(const CompletionParams& p) {
    if (p.thinking_budget) return p.thinking_budget_param.c_str();
    return "reasoning_effort";
}

}  // namespace

ReasoningBudgets parse_reasoning_budgets(const std::string& text) {
    ReasoningBudgets b;
    int64_t* slots[] = {&b.low, &b.medium, &b.high};
    size_t start = 0;
    for (int i = 0; i < 3; ++i) {
        const size_t comma = text.find(',', start);
        if ((i < 2) != (comma != std::string::npos))
            fail("reasoning budgets '{}': give three token counts, low,medium,high", text);
        const std::string part = text.substr(start, i < 2 ? comma - start : std::string::npos);
        size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(part, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (part.empty() || !std::isdigit(static_cast<unsigned char>(part[0])) || used != part.size() || v < 0 ||
            v > (int64_t(1) << 30))
            fail("reasoning budgets '{}': '{}' is not a token count (0 to 2^30)", text, part);
        *slots[i] = v;
        start = comma + 1;
    }
    return b;
}

grammar::ReasoningTags reasoning_grammar_tags(chat::ReasoningFormat format, bool tool_call) {
    if (format == chat::ReasoningFormat::gemma4) return {.open = "<|channel>thought\n", .close = "<channel|>"};
    if (format != chat::ReasoningFormat::harmony) return {};
    // A harmony tool call is a message of its own (its grammar writes the commentary header); any
    // other answer is the final channel's.
    return {.open = "<|channel|>analysis<|message|>",
            .close = "<|end|>",
            .after_close = "<|start|>assistant",
            .answer_open = tool_call ? "" : "<|channel|>final<|message|>"};
}

engine::ThinkingBudget reasoning_budget_tags(chat::ReasoningFormat format) {
    engine::ThinkingBudget b;
    if (format == chat::ReasoningFormat::harmony) {
        b.open = "<|channel|>analysis<|message|>";
        b.close = "<|end|>";
    } else if (format == chat::ReasoningFormat::gemma4) {
        b.open = "<|channel>";
        b.close = "<channel|>";
    }
    return b;
}

void apply_reasoning(const CompletionParams& p, const ReasoningSetup& setup, EngineRequests& requests) {
    const bool chat = p.endpoint == Endpoint::chat_completions;
    std::optional<int64_t> budget = p.thinking_budget;
    if (!budget && !p.reasoning_effort.empty()) {
        const auto& b = setup.budgets;
        budget = p.reasoning_effort == "low" ? b.low : p.reasoning_effort == "medium" ? b.medium : b.high;
    }
    if (budget && (!chat || !setup.template_thinks))
        throw ApiError::invalid(fmt::format("'{}' needs a chat request to a model that thinks (a chat template with "
                                            "<think>, and the server's --reasoning-format not none)",
                                            budget_field(p)),
                                budget_field(p), "invalid_value");
    if (!chat || !setup.template_thinks) return;

    std::shared_ptr<const grammar::Grammar> prefixed;
    if (p.grammar && !p.grammar_spells_reasoning) {
        // Keyed by the answer grammar's text: requests with the same schema share one compiled grammar
        // (and so the engine's warm mask cache).
        const bool tool_call = p.tool_choice == ToolChoice::required || p.tool_choice == ToolChoice::function;
        const grammar::ReasoningTags tags = reasoning_grammar_tags(setup.format, tool_call);
        const std::string key = fmt::format("reasoning-prefix\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", setup.prompt_opens ? 1 : 0,
                                            tags.open, tags.close, tags.after_close, tags.answer_open, p.grammar->to_gbnf());
        prefixed = grammar::GrammarCache::shared().get(
            key, [&] { return grammar::with_reasoning_prefix(*p.grammar, tags, setup.prompt_opens); });
    }
    for (auto& r : requests.subs) {
        if (prefixed) r.grammar = prefixed;
        if (budget) {
            engine::ThinkingBudget b = reasoning_budget_tags(setup.format);
            b.starts_open = setup.prompt_opens;
            b.max_tokens = *budget;
            r.thinking = std::move(b);
        }
    }
}

}  // namespace pagoda::server
