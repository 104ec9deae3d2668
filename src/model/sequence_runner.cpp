#include "model/sequence_runner.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::model {

SequenceRunner::SequenceRunner(StepModel& model, bool prefix_caching, bool free_outside_window)
    : model_(model), blocks_(model.info().n_kv_blocks, model.info().block_size, prefix_caching) {
    if (free_outside_window) blocks_.set_sliding_window(model.info().sliding_window);
}

std::vector<float> SequenceRunner::compute(kv::SeqId seq, int64_t begin, int64_t end, bool all_logits) {
    batch_.clear();
    batch_.block_copies = copies_;
    copies_.clear();
    auto adapter = lora_.find(seq);
    const int32_t s = batch_.add_sequence(blocks_.block_table(seq),
                                          adapter == lora_.end() ? lora::AdapterRef{} : adapter->second);
    const auto& tokens = blocks_.tokens(seq);
    for (int64_t p = begin; p < end; ++p)
        batch_.add(tokens[size_t(p)], int32_t(p), s, blocks_.slot(seq, p), all_logits || p + 1 == end);
    std::vector<float> logits = model_.forward(batch_);
    blocks_.mark_computed(seq, end);
    return logits;
}

std::vector<float> SequenceRunner::prefill(kv::SeqId seq, std::span<const int32_t> prompt, int64_t chunk,
                                           bool all_logits) {
    if (prompt.empty()) fail("the prompt is empty: nothing to compute");
    auto adapter = lora_.find(seq);
    auto result = blocks_.allocate(seq, prompt, adapter == lora_.end() ? 0 : adapter->second.cache_key());
    if (result.status != kv::KvStatus::ok)
        fail("the KV cache ({} blocks of {} tokens) cannot hold a {}-token prompt; raise --kv-memory",
             blocks_.n_blocks(), blocks_.block_size(), prompt.size());
    last_cached_tokens_ = result.n_cached_tokens;
    chunk = std::max<int64_t>(1, chunk);
    std::vector<float> logits;
    for (int64_t begin = result.n_cached_tokens; begin < int64_t(prompt.size()); begin += chunk) {
        int64_t end = std::min<int64_t>(int64_t(prompt.size()), begin + chunk);
        std::vector<float> part = compute(seq, begin, end, all_logits);
        if (all_logits) logits.insert(logits.end(), part.begin(), part.end());
        else logits = std::move(part);
    }
    return logits;
}

std::vector<float> SequenceRunner::decode(kv::SeqId seq, int32_t token) {
    const int32_t tokens[1] = {token};
    if (blocks_.append(seq, tokens, copies_) != kv::KvStatus::ok)
        fail("the KV cache ({} blocks of {} tokens) is full after {} tokens; raise --kv-memory", blocks_.n_blocks(),
             blocks_.block_size(), blocks_.num_tokens(seq));
    const int64_t n = blocks_.num_tokens(seq);
    return compute(seq, n - 1, n, false);
}

}  // namespace pagoda::model
