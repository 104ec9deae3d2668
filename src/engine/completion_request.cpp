#include "engine/completion_request.h"

#include <cmath>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda::engine {
namespace {

using json = nlohmann::json;

const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

double number(const json& body, const char* name, double lo, double hi, double fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number()) fail("'{}' must be a number, got {}", name, v->type_name());
    double x = v->get<double>();
    if (!(x >= lo && x <= hi)) fail("'{}' must be in [{}, {}], got {}", name, lo, hi, x);
    return x;
}

int64_t integer(const json& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number_integer()) fail("'{}' must be an integer, got {}", name, v->dump());
    int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
    if (x < lo || x > hi) fail("'{}' must be in {}..{}, got {}", name, lo, hi, x);
    return x;
}

bool boolean(const json& body, const char* name, bool fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_boolean()) fail("'{}' must be true or false, got {}", name, v->dump());
    return v->get<bool>();
}

std::vector<int32_t> token_array(const json& arr, const char* what) {
    std::vector<int32_t> ids;
    ids.reserve(arr.size());
    for (const auto& t : arr) {
        if (!t.is_number_integer()) fail("{} must hold token ids (integers), found {}", what, t.dump());
        int64_t id = t.get<int64_t>();
        if (id < 0 || id > INT32_MAX) fail("{} holds token id {}, which is out of range", what, id);
        ids.push_back(int32_t(id));
    }
    return ids;
}

std::vector<int32_t> parse_prompt(const json& body, const tokenizer::Tokenizer* tok) {
    const json* p = field(body, "prompt");
    if (!p) fail("'prompt' is required");
    const json* one = p;
    if (p->is_array() && !p->empty() && (p->at(0).is_string() || p->at(0).is_array())) {
        if (p->size() != 1) fail("'prompt' holds {} prompts; send one prompt per request", p->size());
        one = &p->at(0);
    }
    if (one->is_string()) {
        if (!tok) fail("a text 'prompt' needs the model's tokenizer; give token ids instead");
        tokenizer::EncodeOptions options;
        options.parse_special = true;
        auto ids = tok->encode(one->get<std::string>(), options);
        if (ids.empty()) fail("'prompt' encodes to no tokens");
        return ids;
    }
    if (one->is_array()) {
        auto ids = token_array(*one, "'prompt'");
        if (ids.empty()) fail("'prompt' is an empty token array");
        return ids;
    }
    fail("'prompt' must be a string or an array of token ids, got {}", one->type_name());
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, const tokenizer::Tokenizer* tok) {
    if (!body.is_object()) fail("the request must be a JSON object, got {}", body.type_name());
    CompletionRequest out;
    Request& r = out.request;
    if (const json* m = field(body, "model")) {
        if (!m->is_string()) fail("'model' must be a string");
        out.model = m->get<std::string>();
    }
    if (const json* c = field(body, "custom_id")) {
        if (!c->is_string()) fail("'custom_id' must be a string");
        out.custom_id = c->get<std::string>();
    }
    out.stream = boolean(body, "stream", false);
    if (boolean(body, "echo", false)) fail("'echo' is not supported");
    if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
        fail("'suffix' is not supported");
    r.prompt = parse_prompt(body, tok);

    r.stop.max_tokens = integer(body, "max_tokens", 1, INT32_MAX, 16);
    r.n = int32_t(integer(body, "n", 1, 128, 1));
    if (const json* b = field(body, "best_of"); b && (!b->is_number_integer() || b->get<int64_t>() != r.n))
        fail("'best_of' is not supported (only best_of == n)");
    r.logprobs = int32_t(integer(body, "logprobs", 0, 20, -1));
    r.priority = int32_t(integer(body, "priority", INT32_MIN, INT32_MAX, 0));
    r.stop.ignore_eos = boolean(body, "ignore_eos", false);

    SamplingParams& s = r.sampling;
    s.temperature = float(number(body, "temperature", 0, 2, 1.0));
    s.top_p = float(number(body, "top_p", 0, 1, 1.0));
    if (s.top_p == 0) fail("'top_p' must be greater than 0");
    s.top_k = int32_t(integer(body, "top_k", -1, INT32_MAX, 0));
    if (s.top_k < 0) s.top_k = 0;  // -1 means off (vLLM)
    s.min_p = float(number(body, "min_p", 0, 1, 0.0));
    s.presence_penalty = float(number(body, "presence_penalty", -2, 2, 0.0));
    s.frequency_penalty = float(number(body, "frequency_penalty", -2, 2, 0.0));
    s.repetition_penalty = float(number(body, "repetition_penalty", 1e-6, 10, 1.0));
    if (const json* seed = field(body, "seed")) {
        if (!seed->is_number_integer()) fail("'seed' must be an integer, got {}", seed->dump());
        s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
    }
    if (const json* bias = field(body, "logit_bias")) {
        if (!bias->is_object()) fail("'logit_bias' must be an object mapping token ids to biases");
        for (const auto& [key, value] : bias->items()) {
            size_t used = 0;
            long long id = -1;
            try {
                id = std::stoll(key, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used != key.size() || id < 0 || id > INT32_MAX)
                fail("'logit_bias' key '{}' is not a token id", key);
            if (!value.is_number()) fail("'logit_bias' value for token {} must be a number", key);
            double b = value.get<double>();
            if (!(b >= -100 && b <= 100)) fail("'logit_bias' value for token {} must be in [-100, 100], got {}", key, b);
            s.logit_bias[int32_t(id)] = float(b);
        }
    }
    if (const json* stop = field(body, "stop")) {
        if (stop->is_string()) {
            r.stop.stop.push_back(stop->get<std::string>());
        } else if (stop->is_array()) {
            if (stop->size() > 16) fail("'stop' holds {} strings; at most 16 are allowed", stop->size());
            for (const auto& x : *stop) {
                if (!x.is_string()) fail("'stop' must hold strings, found {}", x.dump());
                r.stop.stop.push_back(x.get<std::string>());
            }
        } else {
            fail("'stop' must be a string or an array of strings");
        }
        for (const auto& x : r.stop.stop)
            if (x.empty()) fail("'stop' strings must not be empty");
    }
    if (const json* ids = field(body, "stop_token_ids")) {
        if (!ids->is_array()) fail("'stop_token_ids' must be an array of token ids");
        r.stop.stop_token_ids = token_array(*ids, "'stop_token_ids'");
    }
    if (tok) {
        for (int32_t id : r.prompt)
            if (id >= tok->n_vocab()) fail("'prompt' token id {} is out of range (vocabulary has {} tokens)", id, tok->n_vocab());
    }
    s.validate();
    return out;
}

void CompletionAccumulator::add(const Delta& d) {
    if (d.index < 0 || size_t(d.index) >= choices_.size()) fail("delta for choice {} of {}", d.index, choices_.size());
    CompletionChoice& c = choices_[size_t(d.index)];
    c.text += d.text;
    c.tokens.insert(c.tokens.end(), d.token_ids.begin(), d.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish_reason) {
        c.finish = d.finish_reason;
        c.error = d.error;
    }
    usage_ = d.usage;
    if (d.request_done) {
        done_ = true;
        timings_ = d.timings;
    }
}

std::string CompletionAccumulator::error() const {
    for (const auto& c : choices_)
        if (c.finish == FinishReason::error) return c.error;
    return {};
}

json completion_error(const std::string& message, const std::string& type) {
    return json{{"error", {{"message", message}, {"type", type}}}};
}

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const CompletionAccumulator& result, int32_t logprobs, const tokenizer::Tokenizer* tok) {
    auto piece = [&](int32_t t) {
        // Byte tokens may be part of a character: JSON strings must be valid UTF-8.
        if (tok && t < tok->n_vocab()) return tokenizer::utf8_sanitize(tok->token_to_piece(t, true));
        return std::to_string(t);
    };
    json choices = json::array();
    for (size_t i = 0; i < result.choices().size(); ++i) {
        const CompletionChoice& c = result.choices()[i];
        json lp = nullptr;
        if (logprobs >= 0) {
            json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
            int64_t offset = 0;
            for (const TokenLogprob& t : c.logprobs) {
                const std::string p = piece(t.token);
                tokens.push_back(p);
                values.push_back(t.logprob);
                json top = json::object();
                for (const auto& [alt, v] : t.top) top[piece(alt)] = v;
                tops.push_back(top);
                offsets.push_back(std::min<int64_t>(offset, int64_t(c.text.size())));
                offset += int64_t(p.size());
            }
            lp = {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
        }
        json reason = c.finish ? json(finish_reason_name(*c.finish)) : json(nullptr);
        choices.push_back({{"index", i}, {"text", c.text}, {"finish_reason", reason}, {"logprobs", lp}});
    }
    const Usage& u = result.usage();
    return json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", choices},
                {"usage",
                 {{"prompt_tokens", u.prompt_tokens},
                  {"completion_tokens", u.completion_tokens},
                  {"total_tokens", u.prompt_tokens + u.completion_tokens},
                  {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}}}};
}

}  // namespace pagoda::engine
