// The gateway's /v1/embeddings, apart from gateway.cpp: parse (embedding_request.h), tokenize, check
// against the model (vocabulary, context, width), then one engine request per input, all submitted
// at once so the engine batches them; the Job collects the pooled vectors (embedding_response.h).
#include <chrono>
#include <fmt/format.h>

#include "core/error.h"
#include "server/embedding_request.h"
#include "server/gateway.h"
#include "server/lora_choice.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

std::string input_param(size_t i, size_t n) { return n == 1 ? "input" : fmt::format("input[{}]", i); }

}  // namespace

std::shared_ptr<Job> Gateway::start_embeddings(const json& body, const ApiKey* key, const std::string& request_id,
                                               DeltaSink sink) {
    const std::string key_name = key ? key->name : "anonymous";
    admit_or_throw(key_name);
    auto invalid = [&](ApiError e) -> ApiError {
        metrics_.on_rejection(key_name, "invalid");
        return e;
    };
    EmbeddingParams p;
    try {
        p = parse_embedding_request(body);
    } catch (const ApiError& e) {
        throw invalid(e);
    }
    lora::AdapterRef adapter;  // `model` may name a LoRA adapter: the inputs run under it
    try {
        adapter = adapter_for(loras_.get(), options_.model_name, p.model, {});
    } catch (const ApiError& e) {
        throw invalid(e);
    }
    const model::StepModelInfo& info = engine_->model_info();
    if (p.dimensions && *p.dimensions != info.hidden_size)
        throw invalid(ApiError::invalid(fmt::format("'dimensions' {} cannot be served: this model's embeddings have {} "
                                                    "dimensions and it was not trained to be shortened (Matryoshka)",
                                                    *p.dimensions, info.hidden_size),
                                        "dimensions", "unsupported_value"));

    const tokenizer::Tokenizer& tok = *engine_->tokenizer();
    const int64_t limit = options_.max_prompt_tokens > 0 ? std::min(options_.max_prompt_tokens, engine_->context_limit())
                                                         : engine_->context_limit();
    std::vector<engine::Request> requests;
    int64_t total_tokens = 0;
    for (size_t i = 0; i < p.inputs.size(); ++i) {
        const std::string param = input_param(i, p.inputs.size());
        engine::Request r;
        if (const auto* ids = std::get_if<std::vector<int32_t>>(&p.inputs[i])) {
            for (int32_t id : *ids)
                if (id >= info.vocab_size)
                    throw invalid(ApiError::invalid(fmt::format("token id {} in '{}' is out of range (the vocabulary has {} "
                                                                "tokens)", id, param, info.vocab_size),
                                                    param, "invalid_value"));
            r.prompt = *ids;
        } else {
            // As for completion prompts: the vocabulary's BOS/EOS as encode() adds them, and no
            // special-token text parsed out of user input.
            r.prompt = tok.encode(std::get<std::string>(p.inputs[i]));
            if (r.prompt.empty()) throw invalid(ApiError::invalid(fmt::format("'{}' encodes to no tokens", param), param, "invalid_value"));
        }
        if (int64_t(r.prompt.size()) > limit)
            throw invalid(ApiError::invalid(fmt::format("'{}' has {} tokens; at most {} fit this model", param, r.prompt.size(), limit),
                                            param, "context_length_exceeded"));
        r.embedding = engine::EmbeddingSpec{pooling_, true};
        r.stop.max_tokens = 1;
        r.lora = adapter;
        total_tokens += int64_t(r.prompt.size());
        requests.push_back(std::move(r));
    }

    admit_load(key, key_name, total_tokens, "input");

    CompletionParams params;
    params.endpoint = Endpoint::embeddings;
    params.model = p.model;
    std::shared_ptr<Job> job(new Job(*this, request_id, params, ResponseContext{}, 0));
    job->collected_ =
        std::make_unique<EmbeddingAssembler>(served_model_id(options_.model_name, p.model), p.encoding, requests.size());
    job->key_name_ = key_name;
    job->limited_ = key != nullptr;
    job->reserved_tokens_ = total_tokens;
    const size_t n = requests.size();
    submit_collected(*job, requests, sink, key_name, [n](size_t sub) { return input_param(sub, n); });
    return job;
}

void Gateway::submit_collected(Job& job, std::vector<engine::Request>& requests, const DeltaSink& sink,
                               const std::string& key_name, const std::function<std::string(size_t)>& param_of) {
    for (size_t sub = 0; sub < requests.size(); ++sub) {
        try {
            auto handle = engine_->submit(std::move(requests[sub]), [sink, sub](const engine::Delta& d) { sink(sub, d); });
            job.engine_ids_.push_back(handle.id());
        } catch (const Error& e) {
            job.cancel();
            job.finish(400);
            metrics_.on_rejection(key_name, "invalid");
            throw ApiError::invalid(e.what(), param_of(sub));
        }
    }
}

}  // namespace pagoda::server
