// Sampling and stop fields of /v1/completions and /v1/chat/completions (openai_request_parts.h).
#include <fmt/format.h>
#include <limits>

#include "core/json_reader.h"
#include "server/api_error.h"
#include "server/openai_request_parts.h"

namespace pagoda::server::openai_fields {
namespace {

using json = nlohmann::json;
using namespace json_reader;

constexpr int64_t kTokenCountCap = int64_t(1) << 40;

void parse_stop(const json& body, CompletionParams& p) {
    // vLLM: the stop string that ended a choice stays at the end of its text.
    if (const json* v = field(body, "include_stop_str_in_output"))
        p.include_stop_str = read_bool(*v, "include_stop_str_in_output");
    const json* stop = field(body, "stop");
    if (!stop) return;
    if (stop->is_string()) {
        p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
        if (stop->size() > kMaxStopStrings) bad_value("stop", fmt::format("may hold at most {} strings", kMaxStopStrings));
        for (size_t i = 0; i < stop->size(); ++i) p.stop.push_back(read_string((*stop)[i], fmt::format("stop[{}]", i)));
    } else {
        wrong_type("stop", "a string or an array of strings", *stop);
    }
    for (const auto& s : p.stop)
        if (s.empty()) bad_value("stop", "must not contain empty strings");
}

void parse_logit_bias(const json& v, CompletionParams& p) {
    if (!v.is_object()) wrong_type("logit_bias", "an object mapping token ids to numbers", v);
    for (auto it = v.begin(); it != v.end(); ++it) {
        int64_t id = -1;
        try {
            size_t used = 0;
            id = std::stoll(it.key(), &used);
            if (used != it.key().size()) id = -1;
        } catch (const std::exception&) {
            id = -1;
        }
        if (id < 0 || id > std::numeric_limits<int32_t>::max())
            throw ApiError::invalid(fmt::format("'logit_bias' keys must be token ids, got '{}'", it.key()), "logit_bias",
                                    "invalid_value");
        p.logit_bias[int32_t(id)] = float(read_number(it.value(), "logit_bias." + it.key(), -100, 100));
    }
}

// thinking_token_budget (vLLM) or its alias max_thinking_tokens, and reasoning_effort; what they
// need of the model is checked later (server/reasoning_request.h).
void parse_thinking_budget(const json& body, CompletionParams& p) {
    for (const char* name : {"thinking_token_budget", "max_thinking_tokens"})
        if (const json* v = field(body, name)) {
            if (p.thinking_budget)
                throw ApiError::invalid("send one of 'thinking_token_budget' and 'max_thinking_tokens'", name,
                                        "invalid_value");
            p.thinking_budget = read_integer(*v, name, 0, int64_t(1) << 30);
            p.thinking_budget_param = name;
        }
    if (const json* v = field(body, "reasoning_effort")) {
        const std::string& e = read_string(*v, "reasoning_effort");
        if (e != "low" && e != "medium" && e != "high")
            throw ApiError::invalid(fmt::format("'reasoning_effort' must be \"low\", \"medium\" or \"high\", got \"{}\"", e),
                                    "reasoning_effort", "invalid_value");
        p.reasoning_effort = e;
    }
}

}  // namespace

std::vector<int32_t> token_array(const json& v, const std::string& name) {
    std::vector<int32_t> ids;
    ids.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        ids.push_back(int32_t(read_integer(v[i], fmt::format("{}[{}]", name, i), 0, std::numeric_limits<int32_t>::max())));
    return ids;
}

void parse_sampling(const json& body, CompletionParams& p) {
    if (const json* v = field(body, "n")) p.n = int32_t(read_integer(*v, "n", 1, kMaxChoices));
    if (const json* v = field(body, "timeout")) {
        p.timeout = read_number(*v, "timeout", 0, kMaxStartTimeout);
        if (!(*p.timeout > 0))
            throw ApiError::invalid("'timeout' must be a number of seconds above 0", "timeout", "invalid_value");
    }
    if (const json* v = field(body, "priority"))
        p.priority = int32_t(read_integer(*v, "priority", -kMaxPriority, kMaxPriority));
    if (const json* v = field(body, "best_of")) {
        if (read_integer(*v, "best_of", 1, kMaxChoices) != p.n)
            throw ApiError::invalid("'best_of' different from 'n' is not supported", "best_of", "unsupported_parameter");
    }
    // max_completion_tokens is the newer name (chat); it wins over max_tokens.
    if (const json* v = field(body, "max_tokens")) p.max_tokens = read_integer(*v, "max_tokens", 1, kTokenCountCap);
    if (const json* v = field(body, "max_completion_tokens")) {
        p.max_tokens = read_integer(*v, "max_completion_tokens", 1, kTokenCountCap);
        p.max_tokens_param = "max_completion_tokens";
    }
    parse_stop(body, p);
    parse_thinking_budget(body, p);
    if (const json* v = field(body, "min_tokens")) {
        p.min_tokens = read_integer(*v, "min_tokens", 0, kTokenCountCap);
        if (p.max_tokens && p.min_tokens > *p.max_tokens)
            throw ApiError::invalid(fmt::format("'min_tokens' ({}) must not exceed '{}' ({})", p.min_tokens,
                                                p.max_tokens_param, *p.max_tokens),
                                    "min_tokens", "invalid_value");
    }
    if (const json* v = field(body, "stop_token_ids"))
        p.stop_token_ids = token_array(read_array(*v, "stop_token_ids", "an array of token ids"), "stop_token_ids");
    if (const json* v = field(body, "temperature")) p.temperature = float(read_number(*v, "temperature", 0, 2));
    if (const json* v = field(body, "top_p")) {
        p.top_p = float(read_number(*v, "top_p", 0, 1));
        if (p.top_p <= 0) bad_value("top_p", "must be greater than 0 and at most 1");
    }
    if (const json* v = field(body, "top_k")) {
        const int64_t k = read_integer(*v, "top_k", -1, std::numeric_limits<int32_t>::max());
        p.top_k = k < 0 ? 0 : int32_t(k);  // vLLM: -1 means off
    }
    if (const json* v = field(body, "min_p")) p.min_p = float(read_number(*v, "min_p", 0, 1));
    if (const json* v = field(body, "repetition_penalty")) {
        p.repetition_penalty = float(read_number(*v, "repetition_penalty", 0, 10));
        if (p.repetition_penalty <= 0) bad_value("repetition_penalty", "must be greater than 0");
    }
    if (const json* v = field(body, "presence_penalty")) p.presence_penalty = float(read_number(*v, "presence_penalty", -2, 2));
    if (const json* v = field(body, "frequency_penalty"))
        p.frequency_penalty = float(read_number(*v, "frequency_penalty", -2, 2));
    if (const json* v = field(body, "logit_bias")) parse_logit_bias(*v, p);
    if (const json* v = field(body, "seed")) p.seed = uint64_t(read_integer(*v, "seed"));
    if (const json* v = field(body, "ignore_eos")) p.ignore_eos = read_bool(*v, "ignore_eos");
}

}  // namespace pagoda::server::openai_fields
