// Collects the engine's results for one POST /v1/rerank or /v1/score (one scoring request per
// document or pair, "subs"; each delivers the answer tokens' logits, token_scores.h) into the
// response:
//   rerank: {"id", "model", "results": [{"index", "relevance_score", "document": {"text"}}],
//            "usage": {"prompt_tokens", "total_tokens"}}: best first, equal scores in input order,
//            at most top_n, "document" only with return_documents;
//   score:  {"id", "object": "list", "created", "model", "data": [{"index", "object": "score",
//            "score"}], "usage"}: in input order.
// A decoder reranker's relevance score is sigmoid(logit(yes) - logit(no)), in (0, 1); a
// classification-head reranker's is its head's first class on the sub's pooled hidden state
// (model/classifier_head.h: the raw logit of a one-class head, a probability after softmax).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/classifier_head.h"
#include "server/collected_response.h"
#include "server/rerank_request.h"

namespace pagoda::server {

class RerankAssembler : public CollectedResponse {
public:
    // `params` gives the documents, top_n, return_documents and the shape; `id` the response id.
    // With `head`, each sub is an embedding request whose pooled state the head scores; without,
    // a scoring request for the yes/no logits.
    RerankAssembler(std::string model, std::string id, int64_t created, const RerankParams& params,
                    std::shared_ptr<const model::ClassifierHead> head = nullptr);

    void add(size_t sub, const engine::Delta& delta) override;
    bool done() const override { return n_done_ == results_.size(); }
    const std::optional<std::string>& error() const override { return error_; }
    bool cancelled() const override { return cancelled_; }
    int64_t prompt_tokens() const override;
    nlohmann::json response() const override;

    // The scores in input order (once done()).
    std::vector<double> scores() const;

private:
    struct Result {
        double score = 0;
        int64_t prompt_tokens = 0;
        bool done = false;
    };
    std::string model_, id_;
    int64_t created_ = 0;
    std::vector<std::string> documents_;
    std::optional<int64_t> top_n_;
    bool return_documents_ = true, score_shape_ = false;
    std::shared_ptr<const model::ClassifierHead> head_;
    std::vector<Result> results_;
    size_t n_done_ = 0;
    std::optional<std::string> error_;
    bool cancelled_ = false;
};

// The order of a rerank answer: indices by score, highest first; equal scores keep input order.
std::vector<size_t> rerank_order(const std::vector<double>& scores);

}  // namespace pagoda::server
