#include "tune/step_timer.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/error.h"
#include "kv/block_manager.h"
#include "model/batch.h"

namespace pagoda::tune {

double time_step(model::StepModel& model, const StepShape& shape, int reps) {
    const std::vector<double> s = step_samples(model, shape, reps);
    return s.empty() ? 0.0 : *std::min_element(s.begin(), s.end());
}

std::vector<double> step_samples(model::StepModel& model, const StepShape& shape, int reps) {
    const auto& info = model.info();
    kv::BlockManager blocks(info.n_kv_blocks, info.block_size, false);
    const int32_t vocab = int32_t(std::max<int64_t>(1, info.vocab_size));
    auto prompt = [&](int64_t n, int64_t salt) {
        std::vector<int32_t> p(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t((i * 7919 + salt * 104729 + 13) % vocab);
        return p;
    };
    const int64_t decode_ctx = std::max<int64_t>(1, shape.context);
    for (int32_t s = 0; s < shape.decodes; ++s) {
        const auto p = prompt(decode_ctx, s);
        if (blocks.allocate(s, p).status != kv::KvStatus::ok)
            fail("tune: the KV pool ({} blocks) cannot hold {} sequences of {} tokens", info.n_kv_blocks, shape.decodes,
                 decode_ctx);
        blocks.mark_computed(s, decode_ctx);  // timing only: the pool's values stand in for computed KV
    }
    const kv::SeqId chunk_seq = shape.decodes;
    std::vector<kv::BlockCopy> copies;
    model::Batch batch;
    std::vector<double> samples;
    for (int r = 0; r <= reps; ++r) {
        batch.clear();
        for (int32_t s = 0; s < shape.decodes; ++s) {
            const int32_t tok[1] = {int32_t((s + r) % vocab)};
            if (blocks.append(s, tok, copies) != kv::KvStatus::ok)
                fail("tune: the KV pool ({} blocks) is full", info.n_kv_blocks);
            const int64_t pos = blocks.num_tokens(s) - 1;
            const int32_t idx = batch.add_sequence(blocks.block_table(s));
            batch.add(tok[0], int32_t(pos), idx, blocks.slot(s, pos), true);
        }
        if (shape.prompt_tokens > 0) {
            if (blocks.has_sequence(chunk_seq)) blocks.free(chunk_seq);
            const auto p = prompt(shape.prompt_tokens, 1000003 + r);
            if (blocks.allocate(chunk_seq, p).status != kv::KvStatus::ok)
                fail("tune: the KV pool ({} blocks) cannot hold a {}-token chunk beside {} sequences", info.n_kv_blocks,
                     shape.prompt_tokens, shape.decodes);
            const int32_t idx = batch.add_sequence(blocks.block_table(chunk_seq));
            for (int64_t i = 0; i < shape.prompt_tokens; ++i)
                batch.add(p[size_t(i)], int32_t(i), idx, blocks.slot(chunk_seq, i), i + 1 == shape.prompt_tokens);
        }
        batch.block_copies = copies;
        copies.clear();
        const auto start = std::chrono::steady_clock::now();
        (void)model.forward(batch);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (int32_t q = 0; q < shape.decodes; ++q) blocks.mark_computed(q, blocks.num_tokens(q));
        if (r > 0) samples.push_back(s);
    }
    return samples;
}

}  // namespace pagoda::tune
