// EngineCore::kv_snapshot, apart from engine_core.cpp: reads the block manager and the requests.
#include <algorithm>

#include "engine/engine_core.h"

namespace pagoda::engine {

KvSnapshot EngineCore::kv_snapshot() const {
    KvSnapshot k;
    k.blocks = kv::snapshot_block_map(blocks_);
    k.step = counters_.steps;
    for (const auto& [id, r] : requests_) {
        for (const auto& s : r->seqs) {
            if (s->status == SeqStatus::finished) continue;
            SequenceView v{.seq = s->id, .request = id, .choice = s->index, .status = s->status,
                           .tokens = int64_t(s->tokens.size()), .computed = s->n_computed};
            if (blocks_.has_sequence(s->id))  // blocks held: freed sliding-window entries do not count
                v.blocks = int32_t(int64_t(blocks_.block_table(s->id).size()) - blocks_.num_freed_blocks(s->id));
            k.sequences.push_back(v);
        }
    }
    std::sort(k.sequences.begin(), k.sequences.end(), [](const SequenceView& a, const SequenceView& b) { return a.seq < b.seq; });
    k.taken = Clock::now();
    return k;
}

}  // namespace pagoda::engine
