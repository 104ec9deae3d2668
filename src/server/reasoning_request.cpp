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
        const std::string key = fmt::format("reasoning-prefix\x1f{}\x1f{}", setup.prompt_opens ? 1 : 0, p.grammar->to_gbnf());
        prefixed = grammar::GrammarCache::shared().get(
            key, [&] { return grammar::with_reasoning_prefix(*p.grammar, {}, setup.prompt_opens); });
    }
    for (auto& r : requests.subs) {
        if (prefixed) r.grammar = prefixed;
        if (budget) r.thinking = engine::ThinkingBudget{.starts_open = setup.prompt_opens, .max_tokens = *budget};
    }
}

}  // namespace pagoda::server
