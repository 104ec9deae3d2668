// Job: one HTTP request's life in the gateway (gateway.h): its response assembly from engine deltas,
// its failure, and what finishing it returns to the rate limiter and the metrics.
#include "server/gateway.h"
#include "server/responses_events.h"

namespace pagoda::server {

using json = nlohmann::json;

Job::Job(Gateway& gateway, std::string request_id, CompletionParams params, ResponseContext ctx, size_t n_subs)
    : gateway_(gateway),
      request_id_(std::move(request_id)),
      params_(std::move(params)),
      assembler_(std::move(ctx), n_subs) {
    ++gateway_.active_jobs_;
}

Job::~Job() {
    if (!finished_) {
        cancel();
        finish(499);  // nginx's "client closed request": the transport went away before answering
    }
}

void Job::cancel() {
    if (finished_) return;  // after finish() the gateway may be gone (keep_alive)
    if (gateway_.state() != Gateway::State::ready) return;
    for (engine::RequestId id : engine_ids_) gateway_.engine_->cancel(id);
}

std::vector<json> Job::opening_chunks() const {
    if (messages_) return messages_->opening_events();
    return responses_ ? responses_->opening() : assembler_.opening_chunks();
}

json Job::response() const {
    if (collected_) return collected_->response();
    if (messages_) return messages_->message();
    return responses_ ? responses_->response() : assembler_.response();
}

std::vector<json> Job::add(size_t sub, const engine::Delta& delta) {
    if (delta.error_code == "deadline_exceeded" && !deadline_missed_) {
        deadline_missed_ = delta.error;
        gateway_.metrics_.on_deadline_miss(key_name_, "queue");
    }
    if (collected_) {
        collected_->add(sub, delta);
        return {};
    }
    if (messages_) return add_message(sub, delta);
    std::vector<json> chunks = assembler_.add(sub, delta);
    if (!responses_) return chunks;
    // /v1/responses: the chat chunks become Responses events; the last delta closes the response
    // and, unless it failed or its client left, stores it.
    std::vector<json> events;
    for (const json& chunk : chunks)
        for (json& e : responses_->feed(chunk)) events.push_back(std::move(e));
    if (assembler_.done() && !responses_->closed()) {
        const std::optional<ApiError> failed = failure();
        std::optional<std::string> error;
        if (failed) error = failed->what();
        for (json& e : responses_->close(assembler_.usage(), error)) events.push_back(std::move(e));
        if (!failed && !assembler_.cancelled() && responses_->context().store)
            gateway_.store_response(*responses_, responses_conversation_);
    }
    return events;
}

std::optional<ApiError> Job::failure() const {
    const std::optional<std::string>& error = collected_ ? collected_->error() : assembler_.error();
    const bool cancelled = collected_ ? collected_->cancelled() : assembler_.cancelled();
    if (deadline_missed_) {
        ApiError e = ApiError::unavailable(*deadline_missed_, "deadline_exceeded");
        // When the queue that held it back should have moved on.
        const engine::EngineStats st = gateway_.engine_->stats();
        e.retry_after = double(engine::retry_after_seconds(st.waiting_requests, st.start_rate));
        return e;
    }
    if (error) return ApiError::internal(*error);
    if (gateway_.cut_off_ && cancelled)
    {
        ApiError e = ApiError::unavailable("the server is shutting down and ended this request before it finished",
                                           "shutting_down");
        e.retry_after = 1;
        return e;
    }
    return std::nullopt;
}

void Job::finish(int status) {
    if (finished_.exchange(true)) return;
    if (limited_) {
        const int64_t used = collected_ ? collected_->prompt_tokens()
                                         : assembler_.prompt_tokens() + assembler_.completion_tokens();
        gateway_.limiter_.finish(key_name_, reserved_tokens_, used, gateway_.now_seconds());
    }
    gateway_.metrics_.on_api_request(key_name_, messages_ ? "messages" : endpoint_name(params_.endpoint), status);
    if (collected_) gateway_.metrics_.on_key_tokens(key_name_, collected_->prompt_tokens(), 0);
    else gateway_.metrics_.on_key_tokens(key_name_, assembler_.prompt_tokens(), assembler_.completion_tokens());
    --gateway_.active_jobs_;
    owner_.reset();  // last: the gateway may be freed once its jobs are finished
}

}  // namespace pagoda::server
