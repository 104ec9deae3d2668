// KvSnapshot: the engine's KV pool as the dashboard shows it — every block's use and owner
// (kv::BlockMap) plus the live sequences that own them, taken on the engine thread between steps
// (EngineCore::kv_snapshot) and handed to other threads by Engine::kv_snapshot().
#pragma once
#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "engine/sequence.h"
#include "kv/block_map.h"

namespace pagoda::engine {

struct SequenceView {
    kv::SeqId seq = 0;
    RequestId request = 0;  // the engine's request number (Delta::request)
    int32_t choice = 0;     // index among the request's n choices
    SeqStatus status = SeqStatus::waiting;
    int64_t tokens = 0, computed = 0;  // prompt + generated; of those, with KV in the pool
    int32_t blocks = 0;                // block-table length (0 while waiting without blocks)
};

struct KvSnapshot {
    kv::BlockMap blocks;
    std::vector<SequenceView> sequences;  // unfinished sequences, by sequence id
    int64_t step = 0;                     // engine steps run when it was taken
    Clock::time_point taken{};            // epoch: never taken
};

}  // namespace pagoda::engine
