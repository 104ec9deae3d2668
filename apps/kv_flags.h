// The KV-cache flags shared by `run`, `serve`, `batch` and the benchmarks: --block-size, --kv-memory,
// --kv-type, --no-prefix-cache.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "apps/cli.h"
#include "model/kv_options.h"

namespace pagoda::app {

struct KvFlags {
    int32_t block_size = kv::kDefaultBlockSize;
    std::string kv_type;  // empty: by model
    std::string memory;
    bool no_prefix_cache = false;
    int32_t state_snapshots = 8;

    void add_to(CLI::App& sub) {
        sub.add_option("--block-size", block_size, "KV block size in tokens (power of two, 1..256)")
            ->check(in_range(1, 256));
        sub.add_option("--kv-type", kv_type, "KV element type: f32, f16, bf16, or q8 (int8 with an fp32 scale per "
                       "token row of each head; about half f16's memory at head sizes 64-128) (default: f32 for F32 models, else f16)")
            ->check(CLI::IsMember({"f32", "f16", "bf16", "q8"}));
        sub.add_option("--kv-memory", memory, "KV cache budget: a size with a unit (512MiB, 8GiB, 2G, 4096B) or a fraction of free memory "
                       "(0.9 or 90%); a bare whole number is refused (empty: sized for the command's tokens)");
        sub.add_flag("--no-prefix-cache", no_prefix_cache, "Disable automatic prefix caching");
        sub.add_option("--state-snapshots", state_snapshots, "Models with recurrent layers (qwen35): recurrent-state "
                       "snapshots the prefix cache keeps, each the size of one sequence's state (0: no prefix cache "
                       "for such a model)")
            ->check(in_range(0, 1024));
    }
    model::KvOptions options() const {
        model::KvOptions o;
        o.block_size = block_size;
        if (!kv_type.empty()) o.dtype = kv::parse_kv_dtype(kv_type.c_str());
        o.memory = memory;
        o.prefix_caching = !no_prefix_cache;
        return o;
    }
};

}  // namespace pagoda::app
