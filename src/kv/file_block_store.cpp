#include "kv/file_block_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "kv/tier_file_format.h"

namespace pagoda::kv {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSuffix = ".kvb";
constexpr const char* kTempMark = ".kvb.tmp";

std::string file_name(uint64_t digest, uint64_t hash) { return fmt::format("{:016x}-{:016x}{}", digest, hash, kSuffix); }

// Whether `name` is <16 hex>-<16 hex>.kvb; gives the two numbers.
bool parse_name(const std::string& name, uint64_t& digest, uint64_t& hash) {
    if (name.size() != 37 || name[16] != '-' || name.compare(33, 4, kSuffix) != 0) return false;
    auto hex = [](const std::string& s, size_t at, uint64_t& out) {
        out = 0;
        for (size_t i = at; i < at + 16; ++i) {
            const char c = s[i];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return false;
            out = out << 4 | uint64_t(d);
        }
        return true;
    };
    return hex(name, 0, digest) && hex(name, 17, hash);
}

// Reads up to `n` bytes (all of the file when n is 0) into out. False on an I/O error.
bool read_file(const std::string& path, std::vector<uint8_t>& out, size_t n = 0) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st{};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        return false;
    }
    const size_t want = n ? std::min<size_t>(n, size_t(st.st_size)) : size_t(st.st_size);
    out.resize(want);
    size_t got = 0;
    while (got < want) {
        const ssize_t r = ::read(fd, out.data() + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += size_t(r);
    }
    ::close(fd);
    out.resize(got);
    return true;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= size_t(w);
    }
    return true;
}

}  // namespace

FileBlockStore::FileBlockStore(std::string dir, uint64_t capacity, TierIdentity identity, uint64_t queue_bytes)
    : dir_(std::move(dir)),
      capacity_(capacity),
      identity_(std::move(identity)),
      identity_digest_(identity_.digest()),
      queue_cap_(std::max<uint64_t>(queue_bytes, 1)) {
    if (dir_.empty()) fail("--prefix-cache-dir must name a directory");
    if (capacity_ == 0) fail("--prefix-cache-dir-size must be more than zero");
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (!fs::is_directory(dir_, ec))
        fail("--prefix-cache-dir {}: cannot create or open this directory{}", dir_, ec ? ": " + ec.message() : "");
    if (::access(dir_.c_str(), R_OK | W_OK | X_OK) != 0)
        fail("--prefix-cache-dir {}: the directory is not readable and writable by this process", dir_);
    scan();
    writer_ = std::thread([this] { writer_loop(); });
}

FileBlockStore::~FileBlockStore() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    if (writer_.joinable()) writer_.join();
}

std::string FileBlockStore::path_of(uint64_t hash) const { return dir_ + "/" + file_name(identity_digest_, hash); }

void FileBlockStore::scan() {
    struct Found {
        Entry e;
        fs::file_time_type time;
    };
    std::vector<Found> found;
    std::error_code ec;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.find(kTempMark) != std::string::npos) {  // a write that never finished
            log_warn("prefix cache dir: removing unfinished write {}", it->path().string());
            fs::remove(it->path(), ec);
            ec.clear();
            continue;
        }
        uint64_t digest = 0, hash = 0;
        if (!it->is_regular_file(ec) || !parse_name(name, digest, hash)) continue;  // not ours to judge
        std::vector<uint8_t> head;
        TierFileHeader h;
        std::string why;
        if (!read_file(it->path().string(), head, kTierFileHeaderBytes)) why = "cannot be read";
        else why = parse_tier_header(head, h);
        const uint64_t size = it->file_size(ec);
        if (why.empty() && (h.identity_digest != digest || h.hash != hash)) why = "its header does not match its name";
        if (why.empty() && size != h.file_bytes)
            why = fmt::format("{} bytes long, expected {} (truncated or padded)", size, h.file_bytes);
        if (!why.empty()) {
            reject(name, why);
            continue;
        }
        found.push_back({{name, size, digest == identity_digest_, hash}, it->last_write_time(ec)});
    }
    if (ec) fail("--prefix-cache-dir {}: cannot list the directory: {}", dir_, ec.message());
    std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.time < b.time; });
    std::lock_guard lock(mu_);
    for (Found& f : found) add_entry(std::move(f.e));
    if (!found.empty())
        log_info("prefix cache dir {}: {} block files ({} of this model), {} MiB of {} MiB", dir_, lru_.size(),
                 ours_.size(), bytes_ >> 20, capacity_ >> 20);
}

void FileBlockStore::reject(const std::string& name, const std::string& why) {
    log_warn("prefix cache dir: ignoring and removing {}/{}: {}", dir_, name, why);
    std::error_code ec;
    fs::remove(dir_ + "/" + name, ec);
    std::lock_guard lock(mu_);
    ++counts_.rejected;
}

void FileBlockStore::add_entry(Entry e) {
    if (auto it = by_name_.find(e.name); it != by_name_.end()) remove_entry(it->second, false);
    bytes_ += e.bytes;
    lru_.push_back(std::move(e));
    auto it = std::prev(lru_.end());
    by_name_[it->name] = it;
    if (it->ours) ours_[it->hash] = it;
    while (bytes_ > capacity_ && !lru_.empty()) {
        std::error_code ec;
        fs::remove(dir_ + "/" + lru_.front().name, ec);
        remove_entry(lru_.begin(), true);
    }
}

void FileBlockStore::remove_entry(Lru::iterator it, bool count_as_eviction) {
    bytes_ -= it->bytes;
    if (it->ours) ours_.erase(it->hash);
    by_name_.erase(it->name);
    lru_.erase(it);
    if (count_as_eviction) ++counts_.evicted;
}

bool FileBlockStore::contains(uint64_t hash) const {
    std::lock_guard lock(mu_);
    return ours_.count(hash) != 0 || queued_.count(hash) != 0;
}

void FileBlockStore::store(std::shared_ptr<const TierBlock> block, bool wait) {
    if (!block) return;
    {
        std::unique_lock lock(mu_);
        if (ours_.count(block->hash) || queued_.count(block->hash)) return;
        const uint64_t cost = block->footprint();
        if (wait) idle_.wait(lock, [&] { return queued_bytes_ + cost <= queue_cap_ || queue_.empty(); });
        if (queued_bytes_ + cost > queue_cap_ && !queue_.empty()) {
            ++counts_.dropped;
            return;
        }
        queued_bytes_ += cost;
        queued_.insert(block->hash);
        queue_.push_back(std::move(block));
    }
    wake_.notify_one();
}

void FileBlockStore::writer_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stop_ and nothing left
        std::shared_ptr<const TierBlock> block = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
        lock.unlock();
        write_one(*block);
        lock.lock();
        writing_ = false;
        queued_.erase(block->hash);
        queued_bytes_ -= block->footprint();
        idle_.notify_all();  // flush() and store(..., wait) waiters
    }
    idle_.notify_all();
}

void FileBlockStore::write_one(const TierBlock& block) {
    const std::vector<uint8_t> bytes = encode_tier_file(identity_, block);
    if (bytes.size() > capacity_) return;  // could never be kept
    const std::string name = file_name(identity_digest_, block.hash);
    const std::string final_path = dir_ + "/" + name;
    const std::string temp_path = fmt::format("{}{}{}", final_path, ".tmp", ::getpid());  // contains kTempMark
    const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && write_all(fd, bytes.data(), bytes.size());
    if (fd >= 0) ok = ::close(fd) == 0 && ok;
    // No fsync: a crash or power cut may leave a renamed file with missing bytes, which the length
    // and checksum checks reject, so durability costs nothing in correctness.
    if (ok) ok = ::rename(temp_path.c_str(), final_path.c_str()) == 0;
    if (!ok) {
        const int err = errno;
        ::unlink(temp_path.c_str());
        std::lock_guard lock(mu_);
        if (counts_.write_failures++ % 100 == 0)
            log_warn("prefix cache dir: cannot write {}: {} ({} failed writes so far)", final_path, std::strerror(err),
                     counts_.write_failures);
        return;
    }
    std::lock_guard lock(mu_);
    ++counts_.written;
    add_entry({name, uint64_t(bytes.size()), true, block.hash});
}

std::shared_ptr<const TierBlock> FileBlockStore::load(uint64_t hash) {
    std::string name;
    {
        std::lock_guard lock(mu_);
        auto it = ours_.find(hash);
        if (it == ours_.end()) return nullptr;
        name = it->second->name;
    }
    const std::string path = dir_ + "/" + name;
    std::vector<uint8_t> bytes;
    std::string why;
    std::shared_ptr<TierBlock> block;
    if (!read_file(path, bytes)) why = "cannot be read";
    else block = decode_tier_file(bytes, identity_, hash, why);
    if (!block) {
        {
            std::lock_guard lock(mu_);
            if (auto it = by_name_.find(name); it != by_name_.end()) remove_entry(it->second, false);
        }
        reject(name, why);
        return nullptr;
    }
    {
        std::lock_guard lock(mu_);
        if (auto it = by_name_.find(name); it != by_name_.end()) lru_.splice(lru_.end(), lru_, it->second);
    }
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // now: the LRU order a restart will read
    return block;
}

void FileBlockStore::flush() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

FileStoreStats FileBlockStore::stats() const {
    std::lock_guard lock(mu_);
    FileStoreStats s = counts_;
    s.files = int64_t(lru_.size());
    s.bytes = int64_t(bytes_);
    return s;
}

}  // namespace pagoda::kv
