// The gateway's /v1/rerank, /rerank and /v1/score, apart from gateway.cpp: parse (rerank_request.h),
// build each (query, document) pair's prompt (rerank_prompt.h), check it against the model, then one
// engine request per pair, all submitted at once so the engine batches them: for a decoder reranker
// a scoring request (token_scores.h), the Job collecting the yes/no logits into scores; for a
// classification-head reranker (pooling_type rank) an embedding request pooling the last hidden
// state unnormalised, which the Job scores with the head (rerank_response.h, model/classifier_head.h).
#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "server/gateway.h"
#include "server/lora_choice.h"
#include "server/rerank_response.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("--rerank-template: cannot read '{}'", path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string pair_param(const RerankParams& p, size_t i) {
    if (p.score) return fmt::format("text_2[{}]", i);
    return fmt::format("documents[{}]", i);
}

}  // namespace

void Gateway::setup_rerank(const LoadedModel& loaded) {
    rerank_prompt_.reset();
    rerank_head_ = loaded.classifier_head;
    rerank_add_sep_ = loaded.add_sep;
    if (rerank_head_) {
        // The pair is the given form when there is one, else (a decoder) llama-server's BOS query EOS
        // SEP doc EOS, or (an encoder) the tokenizer's pair template.
        if (!options_.rerank_template.empty())
            rerank_prompt_ = RerankPrompt::from_form(read_text_file(options_.rerank_template), options_.rerank_template);
        else if (!loaded.rerank_template.empty())
            rerank_prompt_ = RerankPrompt::from_form(loaded.rerank_template, "the model's tokenizer.chat_template.rerank");
        if (!options_.rerank_tokens.empty())
            fail("--rerank-tokens names a decoder reranker's answer tokens; this model reranks with its classification "
                 "head ({})",
                 rerank_head_->describe());
        return;
    }
    const tokenizer::Tokenizer& tok = *loaded.engine->tokenizer();
    const auto tokens = rerank_answer_tokens(tok.vocab(), options_.rerank_tokens);  // a bad flag fails the load
    if (!tokens) {
        rerank_unsupported_ =
            "reranking is not supported by this model: it has no classification head (pooling_type rank), and its "
            "vocabulary has no 'yes' and 'no' tokens for a decoder reranker's answer (serve --rerank-tokens YES,NO "
            "names two)";
        return;
    }
    rerank_tokens_ = *tokens;
    if (!options_.rerank_template.empty()) {
        rerank_prompt_ = RerankPrompt::from_form(read_text_file(options_.rerank_template), options_.rerank_template);
        return;
    }
    if (!loaded.rerank_template.empty()) {
        rerank_prompt_ = RerankPrompt::from_form(loaded.rerank_template, "the model's tokenizer.chat_template.rerank");
        return;
    }
    try {
        const std::string bos = tok.bos() >= 0 ? tok.token_to_piece(tok.bos(), true) : std::string();
        const std::string eos = tok.eos() >= 0 ? tok.token_to_piece(tok.eos(), true) : std::string();
        rerank_prompt_ = RerankPrompt::from_chat_template(*template_, bos, eos);
    } catch (const std::exception& e) {
        rerank_unsupported_ = fmt::format("reranking is not supported by this model: its chat template cannot render "
                                          "a rerank prompt ({}); give one with serve --rerank-template FILE",
                                          e.what());
    }
}

std::shared_ptr<Job> Gateway::start_rerank(Endpoint endpoint, const json& body, const ApiKey* key,
                                           const std::string& request_id, DeltaSink sink) {
    const std::string key_name = key ? key->name : "anonymous";
    admit_or_throw(key_name);
    auto invalid = [&](ApiError e) -> ApiError {
        metrics_.on_rejection(key_name, "invalid");
        return e;
    };
    RerankParams p;
    try {
        p = endpoint == Endpoint::score ? parse_score_request(body) : parse_rerank_request(body);
    } catch (const ApiError& e) {
        throw invalid(e);
    }
    lora::AdapterRef adapter;  // `model` may name a LoRA adapter: every pair runs under it
    try {
        adapter = adapter_for(loras_.get(), options_.model_name, p.model, {});
    } catch (const ApiError& e) {
        throw invalid(e);
    }
    if (!rerank_prompt_ && !rerank_head_) throw invalid(ApiError::invalid(rerank_unsupported_, {}, "model_not_supported"));

    const tokenizer::Tokenizer& tok = *engine_->tokenizer();
    const int64_t limit = options_.max_prompt_tokens > 0 ? std::min(options_.max_prompt_tokens, engine_->context_limit())
                                                         : engine_->context_limit();
    std::vector<engine::Request> requests;
    int64_t total_tokens = 0;
    for (size_t i = 0; i < p.pairs.size(); ++i) {
        engine::Request r;
        if (rerank_prompt_) {
            r.prompt = rerank_prompt_->tokenize(tok, p.pairs[i].query, p.pairs[i].document);
        } else if (engine_->model_info().bidirectional) {
            // A cross-encoder reads the pair as its tokenizer lays it out (Hugging Face's
            // encode(query, document): [CLS] q [SEP] d [SEP] for BERT), the document's tokens typed 1
            // where the model has a token-type embedding for them.
            tokenizer::PairEncoding pair = tok.encode_pair(p.pairs[i].query, p.pairs[i].document);
            r.prompt = std::move(pair.ids);
            if (engine_->model_info().n_token_types > 1) r.token_types = std::move(pair.type_ids);
        } else {
            r.prompt = rerank_pair_tokens(tok, p.pairs[i].query, p.pairs[i].document, rerank_add_sep_);
        }
        const std::string param = pair_param(p, i);
        if (r.prompt.empty()) throw invalid(ApiError::invalid(fmt::format("'{}' encodes to no tokens", param), param, "invalid_value"));
        if (int64_t(r.prompt.size()) > limit)
            throw invalid(ApiError::invalid(fmt::format("'{}' makes a prompt of {} tokens with the query; at most {} fit "
                                                        "this model",
                                                        param, r.prompt.size(), limit),
                                            param, "context_length_exceeded"));
        if (rerank_head_)  // the head's input: the last token's final hidden state (a decoder's, which has
                           // seen the pair) or an encoder's CLS row (BertForSequenceClassification)
            r.embedding = engine::EmbeddingSpec{engine_->model_info().bidirectional ? engine::Pooling::cls
                                                                                    : engine::Pooling::last, false};
        else
            r.score_tokens = {rerank_tokens_.first, rerank_tokens_.second};
        r.stop.max_tokens = 1;
        r.lora = adapter;
        total_tokens += int64_t(r.prompt.size());
        requests.push_back(std::move(r));
    }

    admit_load(key, key_name, total_tokens, p.score ? "text_2" : "documents");

    CompletionParams params;
    params.endpoint = endpoint;
    params.model = p.model;
    std::shared_ptr<Job> job(new Job(*this, request_id, params, ResponseContext{}, 0));
    const int64_t created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    job->collected_ = std::make_unique<RerankAssembler>(served_model_id(options_.model_name, p.model),
                                                        fmt::format("{}-{}", p.score ? "score" : "rerank", request_id),
                                                        created, p, rerank_head_);
    job->key_name_ = key_name;
    job->limited_ = key != nullptr;
    job->reserved_tokens_ = total_tokens;
    submit_collected(*job, requests, sink, key_name, [&p](size_t sub) { return pair_param(p, sub); });
    return job;
}

}  // namespace pagoda::server
