// A StepModel for engine tests that checks the paged-KV contract and scripts the logits. It keeps a
// fake KV cache (the token and position written to every slot), runs block copies, and for each
// row that wants logits reads the sequence's whole context back through its block table, failing
// the test if any slot holds the wrong position. The logits are then a pure function of that
// context, so a reference can compute the expected tokens without any KV at all. Rows that want
// their hidden state get hashed_logits of their context too, hidden_size (8) values of it.
#pragma once
#include <cstdint>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/clock.h"
#include "engine/sampler.h"
#include "model/step_model.h"

namespace pagoda::engine::test {

// Deterministic pseudo-random logits of a context: a mix of the tokens and their positions.
inline uint64_t context_hash(const std::vector<int32_t>& context) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < context.size(); ++i) {
        h ^= uint64_t(context[i]) * 0x9E3779B97F4A7C15ull + i;
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

inline void hashed_logits(const std::vector<int32_t>& context, float* logits, int64_t vocab) {
    uint64_t h = context_hash(context);
    for (int64_t i = 0; i < vocab; ++i) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = float(int64_t(h >> 40) % 2000) / 250.0f - 4.0f;  // [-4, 4), distinct steps of 1/250
    }
}

// The greedy continuation under hashed_logits, computed directly from the token list.
inline int32_t reference_next(const std::vector<int32_t>& context, int64_t vocab) {
    std::vector<float> l(static_cast<size_t>(vocab));
    hashed_logits(context, l.data(), vocab);
    int32_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
        if (l[size_t(i)] > l[size_t(best)]) best = int32_t(i);
    return best;
}

inline std::vector<int32_t> reference_greedy(std::vector<int32_t> context, int64_t n, int64_t vocab) {
    std::vector<int32_t> out;
    for (int64_t i = 0; i < n; ++i) {
        out.push_back(reference_next(context, vocab));
        context.push_back(out.back());
    }
    return out;
}

// The sampled continuation of choice `choice` under `fn` (hashed_logits by default), computed
// directly from the token list with the keyed sampler at each absolute position: what the engine
// must produce for a request without stop conditions, whatever else it runs.
inline std::vector<int32_t> reference_sampled(
    std::vector<int32_t> context, int64_t n, const SamplingParams& params, uint64_t choice, int64_t vocab,
    const std::function<void(const std::vector<int32_t>&, float*, int64_t)>& fn = hashed_logits) {
    Sampler sampler(params, choice);
    std::vector<int32_t> out;
    std::vector<float> l(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < n; ++i) {
        fn(context, l.data(), vocab);
        out.push_back(sampler.sample(l.data(), vocab, context, int64_t(context.size())));
        context.push_back(out.back());
    }
    return out;
}

class FakeStepModel : public model::StepModel {
public:
    using LogitsFn = std::function<void(const std::vector<int32_t>& context, float* logits, int64_t vocab)>;

    FakeStepModel(int64_t vocab, int32_t n_blocks, int32_t block_size, int64_t max_context = 1 << 20,
                  LogitsFn fn = hashed_logits)
        : fn_(std::move(fn)), kv_(size_t(n_blocks) * size_t(block_size), Entry{-1, -1}) {
        info_.vocab_size = vocab;
        info_.n_kv_blocks = n_blocks;
        info_.block_size = block_size;
        info_.max_context = max_context;
        info_.hidden_size = kHiddenSize;
    }
    static constexpr int64_t kHiddenSize = 8;
    const std::vector<float>& hidden_rows() const override { return hidden_; }
    const model::StepModelInfo& info() const override { return info_; }
    void set_interrupt_flag(const std::atomic<bool>* flag) override { interrupt_ = flag; }

    std::vector<float> forward(const model::Batch& b) override {
        ++steps;
        // The delay passes in slices so a raised interrupt flag ends the step, as the contract allows;
        // each slice sleeps toward one deadline, so late wake-ups do not add up.
        const auto deadline = std::chrono::steady_clock::now() + step_delay;
        for (auto now = std::chrono::steady_clock::now(); now < deadline; now = std::chrono::steady_clock::now()) {
            if (interrupt_ && interrupt_->load()) throw model::StepInterrupted();
            std::this_thread::sleep_until(std::min(deadline, now + std::chrono::milliseconds(1)));
        }
        if (step_cost.count() > 0) Clock::advance_for_tests(step_cost);
        step_sizes.push_back(b.size());
        step_batches.push_back(b);
        for (int32_t t : b.tokens)
            if (t == fail_on_token) fail("fake model: token {} is poisoned", t);
        const int64_t bs = info_.block_size;
        for (const auto& c : b.block_copies)
            for (int64_t i = 0; i < bs; ++i) kv_[size_t(c.dst * bs + i)] = kv_[size_t(c.src * bs + i)];
        for (int64_t i = 0; i < b.size(); ++i) kv_[size_t(b.slots[size_t(i)])] = {b.tokens[size_t(i)], b.positions[size_t(i)]};
        std::vector<float> out;
        hidden_.clear();
        for (int64_t i = 0; i < b.size(); ++i) {
            const bool hidden = !b.want_hidden.empty() && b.want_hidden[size_t(i)];
            if (!b.want_logits[size_t(i)] && !hidden) continue;
            const auto& table = b.block_tables[size_t(b.seq_index[size_t(i)])];
            const int32_t pos = b.positions[size_t(i)];
            std::vector<int32_t> context;
            for (int32_t p = 0; p <= pos; ++p) {
                const Entry& e = kv_[size_t(table[size_t(p / bs)] * bs + p % bs)];
                EXPECT_EQ(e.pos, p) << "slot of position " << p << " holds position " << e.pos;
                context.push_back(e.token);
            }
            if (hidden) {
                hidden_.resize(hidden_.size() + size_t(kHiddenSize));
                hashed_logits(context, hidden_.data() + hidden_.size() - size_t(kHiddenSize), kHiddenSize);
            }
            if (!b.want_logits[size_t(i)]) continue;
            contexts.push_back(context);
            out.resize(out.size() + size_t(info_.vocab_size));
            fn_(context, out.data() + out.size() - size_t(info_.vocab_size), info_.vocab_size);
        }
        return out;
    }

    int64_t steps = 0;
    std::vector<int64_t> step_sizes;
    std::vector<model::Batch> step_batches;
    std::vector<std::vector<int32_t>> contexts;  // context of every logits row, in order
    int32_t fail_on_token = -1;
    std::chrono::milliseconds step_delay{0};  // makes steps slow enough to interleave with a test thread
    // What a step costs on the engine's clock (engine/clock.h), without sleeping: the draft cost
    // model then measures exactly this, however loaded the machine.
    std::chrono::microseconds step_cost{0};

private:
    struct Entry {
        int32_t token, pos;
    };
    model::StepModelInfo info_;
    const std::atomic<bool>* interrupt_ = nullptr;
    LogitsFn fn_;
    std::vector<Entry> kv_;
    std::vector<float> hidden_;
};

}  // namespace pagoda::engine::test
