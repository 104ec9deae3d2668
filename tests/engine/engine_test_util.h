// Helpers for driving an EngineCore step by step in tests and collecting what each request streamed.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_core.h"
#include "model/step_model.h"

namespace pagoda::engine::test {

struct ChoiceResult {
    std::vector<int32_t> tokens;
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::vector<TokenLogprob> prompt_logprobs;  // as the choice's first delta carried them
    std::optional<FinishReason> finish;
    std::string error, error_code;
    std::vector<float> embedding;
    std::vector<float> token_logits;  // a scoring request's result
    int deltas = 0;
};

struct RequestResult {
    std::map<int32_t, ChoiceResult> choices;
    bool done = false;
    Usage usage;
    RequestTimings timings;
};

class Driver {
public:
    explicit Driver(EngineCore& core) : core_(core) {}

    RequestId add(Request r) {
        RequestId id = next_++;
        auto q = std::make_shared<DeltaQueue>();
        queues_[id] = q;
        core_.add(id, std::move(r), q);
        return id;
    }
    // Moves delivered deltas into results (checking per-delta invariants).
    void collect() {
        for (auto& [id, q] : queues_) {
            while (auto d = q->try_pop()) {
                EXPECT_EQ(d->request, id);
                auto& res = results[id];
                EXPECT_FALSE(res.done) << "delta after the final one";
                auto& c = res.choices[d->index];
                EXPECT_FALSE(c.finish.has_value()) << "delta after the choice finished";
                c.tokens.insert(c.tokens.end(), d->token_ids.begin(), d->token_ids.end());
                c.text += d->text;
                c.logprobs.insert(c.logprobs.end(), d->logprobs.begin(), d->logprobs.end());
                if (!d->prompt_logprobs.empty()) {
                    EXPECT_EQ(c.deltas, 0) << "prompt logprobs after the choice's first delta";
                    c.prompt_logprobs = d->prompt_logprobs;
                }
                if (d->finish_reason) c.finish = d->finish_reason, c.error = d->error, c.error_code = d->error_code;
                if (!d->embedding.empty()) c.embedding = d->embedding;
                if (!d->token_logits.empty()) c.token_logits = d->token_logits;
                ++c.deltas;
                res.usage = d->usage;
                if (d->request_done) res.done = true, res.timings = d->timings;
            }
        }
    }
    // Steps until idle (bounded), collecting after each step.
    int run(int max_steps = 100000) {
        int n = 0;
        while (core_.has_work() && n < max_steps) {
            core_.step();
            collect();
            ++n;
        }
        collect();
        EXPECT_FALSE(core_.has_work()) << "engine still busy after " << max_steps << " steps";
        return n;
    }

    std::map<RequestId, RequestResult> results;

private:
    EngineCore& core_;
    std::map<RequestId, std::shared_ptr<DeltaQueue>> queues_;
    RequestId next_ = 1;
};

inline Request greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
    Request r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0;
    r.stop.max_tokens = max_tokens;
    return r;
}

inline std::vector<int32_t> make_prompt(int64_t n, uint32_t seed, int64_t vocab) {
    std::vector<int32_t> p;
    uint32_t x = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        p.push_back(int32_t((x >> 8) % uint32_t(vocab)));
    }
    return p;
}

// Forwards to a model and records every step's batch (the rows, their positions, images and
// attend_until), for tests that check what the engine asked of the model.
class RecordingModel : public model::StepModel {
public:
    explicit RecordingModel(model::StepModel& inner) : inner_(inner) {}
    const model::StepModelInfo& info() const override { return inner_.info(); }
    std::vector<float> forward(const model::Batch& batch) override {
        steps.push_back(batch);
        return inner_.forward(batch);
    }
    std::vector<model::Batch> steps;

private:
    model::StepModel& inner_;
};

// EngineCore::validate refuses `r` with a message containing `want`.
inline void expect_refused(EngineCore& core, const Request& r, const std::string& want) {
    try {
        core.validate(r);
        ADD_FAILURE() << "accepted; wanted: " << want;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
}

// Prompt-lookup speculation (n-gram 2, draft lengths not by cost) on `r` with its prompt's tokens
// 11..15 made a repeat of 0..4, so lookups find continuations to draft: the verified tokens must
// equal `greedy(r)` (the plain greedy ones), and something must have been drafted.
template <class Greedy>
void expect_drafts_keep_greedy(model::StepModel& model, Request r, Greedy greedy) {
    EngineOptions options;
    options.speculative.ngram_max = 2;
    options.speculative.draft_length_by_cost = false;
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    for (size_t i = 11; i < 16 && i < r.prompt.size(); ++i) r.prompt[i] = r.prompt[i - 11];
    const RequestId id = driver.add(r);
    driver.run();
    EXPECT_EQ(driver.results[id].choices[0].tokens, greedy(r));
    EXPECT_GT(core.stats().draft_tokens, 0) << "nothing was drafted: the test checks nothing speculative";
}

}  // namespace pagoda::engine::test
