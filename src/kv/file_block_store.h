// The file level of the prefix tier: one file a block in a directory, so evicted KV survives the
// process. Files are named <identity digest>-<block hash>.kvb and hold a header, the block's tokens
// and its payload (tier_file_format.h).
//
// - Writes are atomic: a background thread writes each block to a temporary name and renames it
//   into place, so a crash leaves either no file or a whole one (and a file is never trusted
//   anyway before its checksum passes). store() only queues; when the queue already holds
//   queue_bytes the block is dropped (counted), so a slow disk never stalls the engine step.
// - The directory is bounded: files of every identity count toward `capacity` and the least
//   recently used go first (order: modification time at start, then use; a hit refreshes the
//   file's time so the order survives restarts). The start scans the directory: leftover
//   temporary files and files whose header or length is wrong are removed, with a log line;
//   files of other models stay (they are valid, only never served here) but count.
// - load() trusts nothing: a file that fails any check (foreign model or layout, wrong hash,
//   truncated, checksum) is removed with a log line and the lookup is a miss.
// One process should own a directory at a time (a second one's files are seen at its next start).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "kv/tier_block.h"

namespace pagoda::kv {

struct FileStoreStats {
    int64_t files = 0, bytes = 0;     // on disk now (all identities)
    int64_t written = 0;              // blocks written by this process
    int64_t write_failures = 0;       // writes that failed (disk full, permissions): logged
    int64_t dropped = 0;              // blocks not written because the queue was full
    int64_t rejected = 0;             // files found invalid (scan or load) and removed
    int64_t evicted = 0;              // files removed to stay within the capacity
};

class FileBlockStore {
public:
    // Creates `dir` if missing and scans it. Throws pagoda::Error when the directory cannot be
    // created or read, or capacity is zero.
    FileBlockStore(std::string dir, uint64_t capacity_bytes, TierIdentity identity,
                   uint64_t queue_bytes = uint64_t(256) << 20);
    // Writes what is still queued, then stops the writer.
    ~FileBlockStore();
    FileBlockStore(const FileBlockStore&) = delete;
    FileBlockStore& operator=(const FileBlockStore&) = delete;

    const std::string& dir() const { return dir_; }
    uint64_t capacity() const { return capacity_; }
    // A file of this identity holds the block, or it is queued to be written.
    bool contains(uint64_t hash) const;
    // Queues a block to be written (nothing when it is on disk or queued already). A full queue
    // drops it, or with `wait` waits for room (shutdown).
    void store(std::shared_ptr<const TierBlock> block, bool wait = false);
    // The verified block, or null (absent or rejected).
    std::shared_ptr<const TierBlock> load(uint64_t hash);
    // Waits until every queued block is written (tests, shutdown).
    void flush();
    FileStoreStats stats() const;
    // The file a block of this identity lives in.
    std::string path_of(uint64_t hash) const;

private:
    struct Entry {
        std::string name;
        uint64_t bytes = 0;
        bool ours = false;
        uint64_t hash = 0;
    };
    using Lru = std::list<Entry>;  // front: least recently used

    void scan();
    void writer_loop();
    void write_one(const TierBlock& block);
    void add_entry(Entry e);          // under mu_; then trims to capacity
    void remove_entry(Lru::iterator it, bool count_as_eviction);  // under mu_
    void reject(const std::string& name, const std::string& why);

    std::string dir_;
    uint64_t capacity_;
    TierIdentity identity_;
    uint64_t identity_digest_;
    uint64_t queue_cap_;

    mutable std::mutex mu_;
    std::condition_variable wake_, idle_;
    Lru lru_;
    std::unordered_map<std::string, Lru::iterator> by_name_;
    std::unordered_map<uint64_t, Lru::iterator> ours_;
    std::deque<std::shared_ptr<const TierBlock>> queue_;
    std::unordered_set<uint64_t> queued_;
    uint64_t queued_bytes_ = 0;
    bool writing_ = false, stop_ = false;
    uint64_t bytes_ = 0;
    FileStoreStats counts_;
    std::thread writer_;
};

}  // namespace pagoda::kv
