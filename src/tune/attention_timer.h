// Times the CPU paged attention (backend/cpu/attention/attention.h) of one shape, for `pagoda tune`'s choice
// of the attention method (attention_choice.h): a KvPool of one layer in the model's layout and KV
// type, filled with random rows, each sequence on blocks of its own (no shared prefix), and random
// queries. The shape is built once; time() runs it under whatever attention method is installed,
// so the caller times each method on the same cache. Values do not change the work, only positions.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/attention/attention.h"
#include "backend/cpu/kv/kv_pool.h"
#include "core/thread_pool.h"

namespace pagoda::tune {

struct AttentionShape {
    int32_t n_heads = 0;
    kv::KvLayout layout;     // the model's KV heads, head_dim and element type; n_layers is set to 1
    int32_t sequences = 1;   // decode: this many sequences of one token each; a prompt: 1
    int64_t tokens = 1;      // query tokens of each sequence, its last at `position` (a prompt: from 0)
    int64_t position = 0;
    std::string what;        // e.g. "prefill 512 tokens", "decode 16 sequences at 1024"
};

class AttentionBench {
public:
    // Throws pagoda::Error on a shape the kernel refuses (tokens > position + 1, bad layout).
    AttentionBench(const AttentionShape& shape, ThreadPool& threads);
    // Seconds per call: the minimum over repetitions (after a warm-up) lasting at least min_seconds.
    double time(ThreadPool& threads, double min_seconds);
    const AttentionShape& shape() const { return shape_; }

private:
    AttentionShape shape_;
    std::unique_ptr<backend::cpu::KvPool> pool_;
    std::vector<std::vector<int32_t>> tables_;
    std::vector<backend::cpu::AttentionSeq> seqs_;
    std::vector<int32_t> token_seq_, token_pos_;
    std::vector<float> q_, out_;
    backend::cpu::PagedAttentionBatch batch_;
};

}  // namespace pagoda::tune
