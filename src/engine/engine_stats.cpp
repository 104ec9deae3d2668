#include "engine/engine_stats.h"

#include "kv/prefix_tier.h"

namespace pagoda::engine {

void copy_tier_stats(const kv::PrefixTierStats& t, EngineStats& s) {
    s.tier_host = t.has_host;
    s.tier_file = t.has_file;
    s.tier_host_hit_blocks = t.host_hits;
    s.tier_file_hit_blocks = t.file_hits;
    s.tier_miss_blocks = t.misses;
    s.tier_hit_bytes = t.hit_bytes;
    s.tier_spilled_blocks = t.spilled_blocks;
    s.tier_spilled_bytes = t.spilled_bytes;
    s.tier_spill_seconds = t.spill_seconds;
    s.tier_host_blocks = t.host_blocks;
    s.tier_host_bytes = t.host_bytes;
    s.tier_host_capacity_bytes = t.host_capacity;
    s.tier_file_blocks = t.file.files;
    s.tier_file_bytes = t.file.bytes;
    s.tier_file_written = t.file.written;
    s.tier_file_rejected = t.file.rejected;
    s.tier_file_dropped = t.file.dropped;
    s.tier_file_write_failures = t.file.write_failures;
}

}  // namespace pagoda::engine
