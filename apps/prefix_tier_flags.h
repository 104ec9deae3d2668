// The flags of the prefix cache's second tier, on the commands that run the engine (`serve`,
// `batch`, `bench-throughput`, `chat`): --prefix-cache-host-memory SIZE (host memory for blocks
// evicted from the KV pool; a size with a unit or a fraction of available memory, as --kv-memory;
// default off: on the CPU backend the pool already lives in host memory, so a bigger --kv-memory
// serves the same prompts without copies — the tier pays where the pool is small or on a device),
// --prefix-cache-dir DIR (files that outlive the process) and --prefix-cache-dir-size SIZE (the
// directory's limit, default 8GiB; a size with a unit only).
#pragma once
#include <CLI/CLI.hpp>
#include <cctype>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "core/error.h"
#include "kv/prefix_tier.h"
#include "model/kv_options.h"

namespace pagoda::app {

struct PrefixTierFlags {
    std::string host_memory;
    std::string dir;
    std::string dir_size;

    void add_to(CLI::App& sub) {
        sub.add_option("--prefix-cache-host-memory", host_memory,
                       "Keep KV blocks evicted from the pool in this much host memory and load them back for prompts "
                       "that share them: a size with a unit (2GiB) or a fraction of free memory (10%) (default: off)");
        sub.add_option("--prefix-cache-dir", dir,
                       "Also keep evicted KV blocks as files in this directory, which a later process with the same "
                       "model and KV layout reuses (created if missing; default: off)");
        sub.add_option("--prefix-cache-dir-size", dir_size,
                       "Most bytes of block files in --prefix-cache-dir, least recently used removed first: a size "
                       "with a unit (default: 8GiB)");
    }

    // Throws pagoda::Error in the flags' words.
    kv::PrefixTierOptions options(bool prefix_caching) const {
        kv::PrefixTierOptions o;
        if (!host_memory.empty()) o.host_bytes = model::parse_memory_budget(host_memory, "--prefix-cache-host-memory");
        if (!dir_size.empty() && dir.empty()) fail("--prefix-cache-dir-size needs --prefix-cache-dir");
        if (!dir.empty()) {
            o.dir = dir;
            if (dir_size.empty()) {
                o.dir_bytes = uint64_t(8) << 30;
            } else {
                if (!std::isalpha(static_cast<unsigned char>(dir_size.back())))
                    fail("--prefix-cache-dir-size {}: give a size with a unit, e.g. 20GiB (a fraction of memory "
                         "means nothing for a directory)", dir_size);
                o.dir_bytes = model::parse_memory_budget(dir_size, "--prefix-cache-dir-size");
            }
            std::error_code ec;
            std::filesystem::create_directories(dir, ec);
            if (!std::filesystem::is_directory(dir, ec) || ::access(dir.c_str(), R_OK | W_OK | X_OK) != 0)
                fail("--prefix-cache-dir {}: cannot create this directory or write to it", dir);
        }
        if (o.enabled() && !prefix_caching)
            fail("--prefix-cache-host-memory and --prefix-cache-dir extend the prefix cache, which --no-prefix-cache "
                 "turns off");
        return o;
    }
};

}  // namespace pagoda::app
