#include "server/rerank_response.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "engine/token_scores.h"

namespace pagoda::server {

using json = nlohmann::json;

RerankAssembler::RerankAssembler(std::string model, std::string id, int64_t created, const RerankParams& params,
                                 std::shared_ptr<const model::ClassifierHead> head)
    : model_(std::move(model)),
      id_(std::move(id)),
      created_(created),
      top_n_(params.top_n),
      return_documents_(params.return_documents),
      score_shape_(params.score),
      head_(std::move(head)),
      results_(params.pairs.size()) {
    if (!score_shape_ && return_documents_)
        for (const auto& p : params.pairs) documents_.push_back(p.document);
}

void RerankAssembler::add(size_t sub, const engine::Delta& d) {
    if (sub >= results_.size()) fail("rerank response: sub-request {} of {}", sub, results_.size());
    Result& r = results_[sub];
    if (r.done) return;
    r.prompt_tokens = d.usage.prompt_tokens;
    if (!d.request_done) return;
    r.done = true;
    ++n_done_;
    if (d.finish_reason == engine::FinishReason::error && !error_) error_ = d.error;
    if (d.finish_reason == engine::FinishReason::cancelled) cancelled_ = true;
    if (d.finish_reason != engine::FinishReason::stop) return;
    if (head_) {
        if (int64_t(d.embedding.size()) != head_->hidden_size()) {
            if (!error_) error_ = "the engine finished a reranking request without its pooled hidden state";
            return;
        }
        r.score = head_->score(d.embedding);
        return;
    }
    if (d.token_logits.size() != 2) {
        if (!error_) error_ = "the engine finished a scoring request without the two answer logits";
        return;
    }
    r.score = engine::yes_probability(d.token_logits[0], d.token_logits[1]);
}

int64_t RerankAssembler::prompt_tokens() const {
    int64_t n = 0;
    for (const auto& r : results_) n += r.prompt_tokens;
    return n;
}

std::vector<double> RerankAssembler::scores() const {
    std::vector<double> out;
    for (const auto& r : results_) out.push_back(r.score);
    return out;
}

std::vector<size_t> rerank_order(const std::vector<double>& scores) {
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    return order;
}

json RerankAssembler::response() const {
    const int64_t tokens = prompt_tokens();
    const json usage = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
    if (score_shape_) {
        json data = json::array();
        for (size_t i = 0; i < results_.size(); ++i)
            data.push_back({{"index", i}, {"object", "score"}, {"score", results_[i].score}});
        return {{"id", id_}, {"object", "list"}, {"created", created_}, {"model", model_}, {"data", std::move(data)},
                {"usage", usage}};
    }
    std::vector<size_t> order = rerank_order(scores());
    if (top_n_ && size_t(*top_n_) < order.size()) order.resize(size_t(*top_n_));
    json results = json::array();
    for (size_t i : order) {
        json r = {{"index", i}, {"relevance_score", results_[i].score}};
        if (return_documents_) r["document"] = {{"text", documents_[i]}};
        results.push_back(std::move(r));
    }
    return {{"id", id_}, {"model", model_}, {"results", std::move(results)}, {"usage", usage}};
}

}  // namespace pagoda::server
