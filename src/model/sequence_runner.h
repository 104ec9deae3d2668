// Drives a Model directly over its paged KV cache, one or a few sequences at a time, without the
// engine's scheduler: `pagoda run`, the forward-pass tests and the kernel benchmarks use it.
// It owns the KvPool and BlockManager; prompts reuse cached prefix blocks (prefix caching), prompt
// tokens are computed in chunks, and running out of KV blocks is a clear error here (the engine
// preempts instead).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_manager.h"
#include "kv/kv_pool.h"
#include "model/kv_options.h"
#include "model/model.h"

namespace pagoda::model {

class SequenceRunner {
public:
    // `tokens_wanted` sizes the pool when options.memory is empty.
    SequenceRunner(Model& model, const KvOptions& options, int64_t tokens_wanted);

    // Registers `seq` with its prompt and computes the prompt tokens not served by the prefix cache,
    // `chunk` tokens per forward step. Returns the last prompt token's logits, or with all_logits the
    // logits of every computed position (rows for positions cached_tokens()..prompt.size()-1).
    std::vector<float> prefill(kv::SeqId seq, std::span<const int32_t> prompt, int64_t chunk = 512,
                               bool all_logits = false);
    // Appends one token to `seq` and returns its logits.
    std::vector<float> decode(kv::SeqId seq, int32_t token);
    void release(kv::SeqId seq) { blocks_.free(seq); }

    int64_t last_cached_tokens() const { return last_cached_tokens_; }  // prefix hit of the last prefill
    kv::BlockManager& blocks() { return blocks_; }
    kv::KvPool& pool() { return pool_; }
    Model& model() { return model_; }

private:
    std::vector<float> compute(kv::SeqId seq, int64_t begin, int64_t end, bool all_logits);

    Model& model_;
    kv::KvPool pool_;
    kv::BlockManager blocks_;
    Batch batch_;
    std::vector<kv::BlockCopy> copies_;
    int64_t last_cached_tokens_ = 0;
};

}  // namespace pagoda::model
