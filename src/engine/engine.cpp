#include "engine/engine.h"

#include "core/error.h"
#include "core/log.h"

namespace pagoda::engine {

Engine::Engine(std::unique_ptr<model::StepModel> model, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
               EngineOptions options)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)) {
    if (!model_) fail("engine: no model");
    info_ = model_->info();
    core_ = std::make_unique<EngineCore>(*model_, tokenizer_, std::move(options));
    context_limit_ = core_->context_limit();
    snapshot_ = core_->stats();
    core_->set_on_planned([this] {
        EngineStats s = core_->stats();
        std::lock_guard lock(mutex_);
        snapshot_ = std::move(s);
    });
    model_->set_interrupt_flag(&interrupt_);
    thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
    shutdown(false);
    model_->set_interrupt_flag(nullptr);  // the flag is a member: leave the model no dangling pointer
}

RequestHandle Engine::submit(Request request, DeltaCallback on_delta) {
    try {
        core_->validate(request);  // reads only immutable configuration: safe off the engine thread
    } catch (const Error&) {
        std::lock_guard lock(mutex_);
        ++rejected_;
        throw;
    }
    auto queue = std::make_shared<DeltaQueue>();
    RequestId id;
    {
        std::lock_guard lock(mutex_);
        if (!accepting_) fail("the engine is shutting down and accepts no new requests");
        id = next_id_++;
        inbox_.push_back({id, std::move(request), queue, std::move(on_delta), Clock::now()});
    }
    wake_.notify_one();
    return RequestHandle(id, queue);
}

void Engine::cancel(RequestId id) {
    {
        std::lock_guard lock(mutex_);
        cancels_.push_back(id);
    }
    wake_.notify_one();
}

void Engine::shutdown(bool drain) {
    {
        std::lock_guard lock(mutex_);
        accepting_ = false;
        stop_ = true;
        drain_ = drain;
    }
    // Cancelling everything: a step in flight need not finish (it stops at its next op).
    if (!drain) interrupt_ = true;
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

EngineStats Engine::stats() const {
    std::lock_guard lock(mutex_);
    EngineStats s = snapshot_;
    s.requests_rejected = rejected_;
    return s;
}

KvSnapshot Engine::kv_snapshot(std::chrono::milliseconds max_age, std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex_);
    if (kv_generation_ > 0 && Clock::now() - kv_snapshot_.taken <= max_age) return kv_snapshot_;
    if (!thread_done_) {
        const uint64_t seen = kv_generation_;
        kv_wanted_ = true;
        wake_.notify_one();
        kv_taken_.wait_for(lock, wait, [&] { return kv_generation_ != seen || thread_done_; });
    }
    return kv_snapshot_;
}

void Engine::run() {
    for (;;) {
        std::vector<Pending> arrivals;
        std::vector<RequestId> cancels;
        bool stop = false, drain = false;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] {
                return stop_ || kv_wanted_ || !inbox_.empty() || !cancels_.empty() || core_->has_work();
            });
            arrivals.swap(inbox_);
            cancels.swap(cancels_);
            stop = stop_;
            drain = drain_;
        }
        for (auto& p : arrivals) {
            try {
                core_->add(p.id, std::move(p.request), p.queue, std::move(p.callback), p.arrival);
            } catch (const std::exception& e) {
                // Validated at submit; only an engine fault lands here. Tell the caller, keep going.
                Delta d;
                d.request = p.id;
                d.finish_reason = FinishReason::error;
                d.error = e.what();
                d.request_done = true;
                if (p.callback) p.callback(d);
                else p.queue->push(std::move(d));
            }
        }
        for (RequestId id : cancels) core_->cancel(id);
        if (stop && !drain) core_->abort_all();
        if (core_->has_work()) {
            try {
                if (!core_->step() && core_->has_work()) {
                    // Nothing schedulable right now (should not last): don't spin on it.
                    std::unique_lock lock(mutex_);
                    wake_.wait_for(lock, std::chrono::milliseconds(5));
                }
            } catch (const std::exception& e) {
                // A bug in the engine itself: fail everything in flight rather than spin on it.
                log_error("engine: step failed: {}", e.what());
                core_->abort_all(fmt::format("engine failure: {}", e.what()));
            }
        }
        bool want_kv = false;
        {
            std::lock_guard lock(mutex_);
            snapshot_ = core_->stats();
            want_kv = kv_wanted_;
        }
        if (want_kv) {  // between steps, outside the lock: submitters never wait for it
            KvSnapshot k = core_->kv_snapshot();
            {
                std::lock_guard lock(mutex_);
                kv_snapshot_ = std::move(k);
                kv_wanted_ = false;
                ++kv_generation_;
            }
            kv_taken_.notify_all();
        }
        if (stop && !core_->has_work()) {
            std::lock_guard lock(mutex_);
            if (inbox_.empty()) break;
        }
    }
    {
        std::lock_guard lock(mutex_);
        thread_done_ = true;
    }
    kv_taken_.notify_all();
}

}  // namespace pagoda::engine
