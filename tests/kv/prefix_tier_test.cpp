// The prefix tier's stores: the host LRU and its byte limit, the file format's round trip, every
// kind of damaged or foreign file ignored (and removed) rather than loaded, the directory's size
// limit across restarts, and the tier's exact-match rule.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "kv/block_hash.h"
#include "kv/file_block_store.h"
#include "kv/host_block_store.h"
#include "kv/prefix_tier.h"
#include "kv/tier_file_format.h"

namespace pagoda::kv {
namespace {
namespace fs = std::filesystem;

TierIdentity identity(uint64_t model_key = 42) {
    TierIdentity id;
    id.model_key = model_key;
    id.backend = "cpu";
    id.layout = {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .block_size = 4, .dtype = KvDtype::f16};
    id.bytes_per_block = id.layout.bytes_per_block();
    return id;
}

// Block `i` of a chain of blocks: tokens i*4 .. i*4+3, payload bytes derived from i.
std::shared_ptr<TierBlock> make_block(const TierIdentity& id, int i, uint64_t parent = kRootBlockHash) {
    auto b = std::make_shared<TierBlock>();
    for (int t = 0; t < id.layout.block_size; ++t) b->tokens.push_back(i * 4 + t);
    b->parent_hash = parent;
    b->hash = hash_block(parent, b->tokens.data(), int32_t(b->tokens.size()), 0);
    b->payload.resize(id.bytes_per_block);
    for (size_t k = 0; k < b->payload.size(); ++k) b->payload[k] = uint8_t(k * 7 + size_t(i) * 13);
    return b;
}

std::string fresh_dir(const std::string& name) {
    const std::string d = pagoda::test::temp_path(name);
    fs::remove_all(d);
    return d;
}

TEST(Checksum, EveryFlippedBitChangesIt) {
    std::vector<uint8_t> data(1000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 31);
    const uint64_t base = checksum64(data.data(), data.size());
    for (size_t byte : {0ul, 7ul, 31ul, 32ul, 500ul, 991ul, 999ul})
        for (int bit = 0; bit < 8; ++bit) {
            data[byte] ^= uint8_t(1 << bit);
            EXPECT_NE(checksum64(data.data(), data.size()), base) << byte << ":" << bit;
            data[byte] ^= uint8_t(1 << bit);
        }
    EXPECT_EQ(checksum64(data.data(), data.size()), base);
    EXPECT_NE(checksum64(data.data(), 999), base);  // length matters
}

TEST(TierIdentity, DigestSeesEveryField) {
    const TierIdentity a = identity();
    std::vector<TierIdentity> others(7, a);
    others[0].model_key = 43;
    others[1].backend = "reference";
    others[2].layout.n_layers = 3;
    others[3].layout.n_kv_heads = 1;
    others[4].layout.head_dim = 16;
    others[5].layout.block_size = 8;
    others[6].layout.dtype = KvDtype::bf16;
    for (const auto& o : others) {
        EXPECT_NE(o.digest(), a.digest());
        EXPECT_FALSE(o == a);
    }
    EXPECT_EQ(identity().digest(), a.digest());
}

TEST(HostBlockStore, EvictsLeastRecentlyUsedWithinItsBytes) {
    const TierIdentity id = identity();
    const uint64_t one = make_block(id, 0)->footprint();
    HostBlockStore store(3 * one);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store.put(make_block(id, i)));
    EXPECT_EQ(store.size(), 3u);
    EXPECT_EQ(store.bytes(), 3 * one);
    ASSERT_NE(store.get(make_block(id, 0)->hash), nullptr);  // 0 is now the most recent; 1 is oldest
    ASSERT_TRUE(store.put(make_block(id, 3)));
    EXPECT_FALSE(store.contains(make_block(id, 1)->hash));
    EXPECT_TRUE(store.contains(make_block(id, 0)->hash));
    EXPECT_TRUE(store.contains(make_block(id, 2)->hash));
    EXPECT_TRUE(store.contains(make_block(id, 3)->hash));
    EXPECT_EQ(store.evictions(), 1);
    EXPECT_LE(store.bytes(), store.capacity());
    // Putting the same block again costs nothing more.
    ASSERT_TRUE(store.put(make_block(id, 3)));
    EXPECT_EQ(store.size(), 3u);
    EXPECT_EQ(store.bytes(), 3 * one);
    // A block larger than the whole store is refused and evicts nothing.
    HostBlockStore tiny(one - 1);
    EXPECT_FALSE(tiny.put(make_block(id, 0)));
    EXPECT_EQ(tiny.size(), 0u);
}

TEST(TierFileFormat, RoundTrips) {
    const TierIdentity id = identity();
    auto b = make_block(id, 5, 1234);
    b->hash = hash_block(1234, b->tokens.data(), 4, 0);
    const auto bytes = encode_tier_file(id, *b);
    EXPECT_EQ(bytes.size(), kTierFileHeaderBytes + 16 + id.bytes_per_block);
    std::string error;
    auto back = decode_tier_file(bytes, id, b->hash, error);
    ASSERT_NE(back, nullptr) << error;
    EXPECT_EQ(back->tokens, b->tokens);
    EXPECT_EQ(back->payload, b->payload);
    EXPECT_EQ(back->parent_hash, 1234u);
    EXPECT_EQ(back->hash, b->hash);
}

// Every defect is reported and nothing is returned.
TEST(TierFileFormat, RejectsEveryDefect) {
    const TierIdentity id = identity();
    const auto b = make_block(id, 1);
    const auto good = encode_tier_file(id, *b);
    auto expect_rejected = [&](std::vector<uint8_t> bytes, const TierIdentity& as, uint64_t hash, const char* what) {
        std::string error;
        EXPECT_EQ(decode_tier_file(bytes, as, hash, error), nullptr) << what;
        EXPECT_NE(error.find(what), std::string::npos) << "got: " << error;
    };
    auto bad_magic = good;
    bad_magic[0] = 'X';
    expect_rejected(bad_magic, id, b->hash, "bad magic");
    auto bad_version = good;
    bad_version[8] = 2;
    expect_rejected(bad_version, id, b->hash, "format version 2");
    expect_rejected(good, identity(7), b->hash, "another model");
    TierIdentity other_backend = id;
    other_backend.backend = "reference";
    expect_rejected(good, other_backend, b->hash, "another model");
    TierIdentity other_layout = id;
    other_layout.layout.dtype = KvDtype::bf16;
    expect_rejected(good, other_layout, b->hash, "another KV layout");
    TierIdentity other_heads = id;
    other_heads.layout.n_kv_heads = 1;
    other_heads.bytes_per_block = other_heads.layout.bytes_per_block();
    expect_rejected(good, other_heads, b->hash, "another KV layout");
    expect_rejected(good, id, b->hash ^ 1, "holds block");
    expect_rejected(std::vector<uint8_t>(good.begin(), good.end() - 1), id, b->hash, "truncated");
    expect_rejected(std::vector<uint8_t>(good.begin(), good.begin() + 100), id, b->hash, "truncated header");
    auto flipped = good;
    flipped[good.size() - 10] ^= 0x10;
    expect_rejected(flipped, id, b->hash, "checksum mismatch");
    auto flipped_token = good;
    flipped_token[kTierFileHeaderBytes] ^= 1;
    expect_rejected(flipped_token, id, b->hash, "checksum mismatch");
    // A header whose hash was rewritten consistently (name and header) but not from its tokens.
    auto forged = good;
    const uint64_t other = b->hash ^ 0xff;
    std::memcpy(forged.data() + 88, &other, 8);
    expect_rejected(forged, id, other, "not the hash of its tokens");
}

TEST(FileBlockStore, RoundTripAndRestart) {
    const std::string dir = fresh_dir("tier-roundtrip");
    const TierIdentity id = identity();
    {
        FileBlockStore store(dir, 1 << 20, id);
        for (int i = 0; i < 3; ++i) store.store(make_block(id, i));
        store.flush();
        EXPECT_EQ(store.stats().written, 3);
        EXPECT_TRUE(store.contains(make_block(id, 2)->hash));
    }
    FileBlockStore again(dir, 1 << 20, id);  // a new process's view
    EXPECT_EQ(again.stats().files, 3);
    for (int i = 0; i < 3; ++i) {
        auto b = again.load(make_block(id, i)->hash);
        ASSERT_NE(b, nullptr) << i;
        EXPECT_EQ(b->payload, make_block(id, i)->payload);
    }
    EXPECT_EQ(again.load(make_block(id, 9)->hash), nullptr);
    for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().extension(), ".kvb");
}

void overwrite(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

// Damage made on disk between two processes: each damaged file is a miss, is removed, and the
// good ones still load.
TEST(FileBlockStore, DamagedFilesAreIgnoredAndRemoved) {
    const std::string dir = fresh_dir("tier-damage");
    const TierIdentity id = identity();
    std::vector<std::shared_ptr<TierBlock>> blocks;
    {
        FileBlockStore store(dir, 1 << 20, id);
        for (int i = 0; i < 6; ++i) {
            blocks.push_back(make_block(id, i));
            store.store(blocks.back());
        }
    }
    FileBlockStore probe(dir, 1 << 20, id);
    auto path = [&](int i) { return probe.path_of(blocks[size_t(i)]->hash); };
    auto b0 = read_all(path(0));
    b0[kTierFileHeaderBytes + 20] ^= 0x01;  // payload byte flipped: same length, found only by the checksum
    overwrite(path(0), b0);
    auto b1 = read_all(path(1));
    b1[0] = 'Z';  // bad magic: found by the start scan
    overwrite(path(1), b1);
    auto b2 = read_all(path(2));
    b2.resize(b2.size() - 8);  // truncated: found by the start scan
    overwrite(path(2), b2);
    // Block 3's file holds block 4's bytes under block 3's name (a wrong hash).
    overwrite(path(3), read_all(path(4)));
    // A leftover temporary file from a write that never finished.
    overwrite(path(5) + ".tmp999", read_all(path(5)));

    FileBlockStore store(dir, 1 << 20, id);
    EXPECT_EQ(store.stats().rejected, 3);  // magic, truncation and the name/header mismatch at the scan
    EXPECT_FALSE(fs::exists(path(5) + ".tmp999"));
    EXPECT_EQ(store.load(blocks[0]->hash), nullptr);  // checksum, at load
    EXPECT_EQ(store.stats().rejected, 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(store.load(blocks[size_t(i)]->hash), nullptr) << i;
        EXPECT_FALSE(fs::exists(path(i))) << i;
    }
    ASSERT_NE(store.load(blocks[4]->hash), nullptr);
    ASSERT_NE(store.load(blocks[5]->hash), nullptr);
    EXPECT_EQ(store.stats().files, 2);
}

// A directory written for one model or layout serves nothing to another, and keeps its files.
TEST(FileBlockStore, ForeignIdentityNeverMatches) {
    const std::string dir = fresh_dir("tier-foreign");
    const TierIdentity id = identity();
    auto b = make_block(id, 0);
    {
        FileBlockStore store(dir, 1 << 20, id);
        store.store(b);
    }
    TierIdentity other_model = identity(99);
    TierIdentity other_layout = id;
    other_layout.layout.dtype = KvDtype::f32;
    other_layout.bytes_per_block = other_layout.layout.bytes_per_block();
    for (const TierIdentity& o : {other_model, other_layout}) {
        FileBlockStore store(dir, 1 << 20, o);
        EXPECT_FALSE(store.contains(b->hash));
        EXPECT_EQ(store.load(b->hash), nullptr);
        EXPECT_EQ(store.stats().files, 1);  // still there, counted toward the limit
    }
    // A foreign file renamed to look like ours is caught by the header.
    FileBlockStore source(dir, 1 << 20, id);
    FileBlockStore target_view(dir, 1 << 20, other_model);
    fs::copy_file(source.path_of(b->hash), target_view.path_of(b->hash));
    FileBlockStore target(dir, 1 << 20, other_model);
    EXPECT_EQ(target.load(b->hash), nullptr);
    EXPECT_FALSE(fs::exists(target.path_of(b->hash)));
    EXPECT_TRUE(fs::exists(source.path_of(b->hash)));
}

TEST(FileBlockStore, SizeLimitHoldsAcrossRestarts) {
    const std::string dir = fresh_dir("tier-limit");
    const TierIdentity id = identity();
    const uint64_t file_bytes = encode_tier_file(id, *make_block(id, 0)).size();
    {
        FileBlockStore store(dir, 4 * file_bytes, id);
        for (int i = 0; i < 6; ++i) {
            store.store(make_block(id, i));
            store.flush();  // one at a time, so the LRU order is the write order
        }
        EXPECT_EQ(store.stats().files, 4);
        EXPECT_EQ(store.stats().evicted, 2);
        EXPECT_FALSE(store.contains(make_block(id, 0)->hash));
        EXPECT_FALSE(store.contains(make_block(id, 1)->hash));
        // File times decide the order a restart sees (set here: writes within one clock tick tie).
        const auto now = fs::file_time_type::clock::now();
        for (int i = 2; i < 6; ++i)
            fs::last_write_time(store.path_of(make_block(id, i)->hash), now - std::chrono::hours(10 - i));
        ASSERT_NE(store.load(make_block(id, 2)->hash), nullptr);  // a hit makes 2 the most recent
        EXPECT_GT(fs::last_write_time(store.path_of(make_block(id, 2)->hash)), now - std::chrono::minutes(5));
    }
    // A restart with a smaller limit trims the oldest by file time: 3 and 4 go, 2 (touched) stays.
    FileBlockStore smaller(dir, 2 * file_bytes, id);
    EXPECT_EQ(smaller.stats().files, 2);
    EXPECT_LE(uint64_t(smaller.stats().bytes), 2 * file_bytes);
    EXPECT_TRUE(smaller.contains(make_block(id, 2)->hash));
    EXPECT_TRUE(smaller.contains(make_block(id, 5)->hash));
    int on_disk = 0;
    for (const auto& e : fs::directory_iterator(dir)) on_disk += e.is_regular_file();
    EXPECT_EQ(on_disk, 2);
}

TEST(FileBlockStore, RefusesAnUnusableDirectory) {
    const std::string file = pagoda::test::temp_path("tier-not-a-dir");
    overwrite(file, {1, 2, 3});
    EXPECT_THROW(FileBlockStore(file, 1 << 20, identity()), Error);
    EXPECT_THROW(FileBlockStore(fresh_dir("tier-zero"), 0, identity()), Error);
}

TEST(PrefixTier, ServesOnlyExactMatchesAndCountsHitsAndMisses) {
    const TierIdentity id = identity();
    PrefixTier tier(id, {.host_bytes = 1 << 20});
    auto b = make_block(id, 3);
    tier.spill(b);
    EXPECT_TRUE(tier.holds(b->hash));
    EXPECT_NE(tier.fetch(b->hash, b->parent_hash, b->tokens.data(), 0), nullptr);
    std::vector<int32_t> other = b->tokens;
    other[1] += 1;
    EXPECT_EQ(tier.fetch(b->hash, b->parent_hash, other.data(), 0), nullptr);  // same hash, other tokens
    EXPECT_EQ(tier.fetch(b->hash, b->parent_hash + 1, b->tokens.data(), 0), nullptr);
    EXPECT_EQ(tier.fetch(b->hash, b->parent_hash, b->tokens.data(), 5), nullptr);
    const auto s = tier.stats();
    EXPECT_EQ(s.host_hits, 1);
    EXPECT_EQ(s.misses, 3);
    EXPECT_EQ(s.hit_bytes, int64_t(id.bytes_per_block));
    EXPECT_EQ(s.spilled_blocks, 1);
    auto wrong = make_block(id, 1);
    wrong->payload.pop_back();
    EXPECT_THROW(tier.spill(wrong), Error);
}

TEST(PrefixTier, FileHitsFillTheHostStore) {
    const std::string dir = fresh_dir("tier-both");
    const TierIdentity id = identity();
    auto b = make_block(id, 2);
    {
        PrefixTier tier(id, {.dir = dir, .dir_bytes = 1 << 20});
        tier.spill(b);
        tier.flush();
    }
    PrefixTier tier(id, {.host_bytes = 1 << 20, .dir = dir, .dir_bytes = 1 << 20});
    EXPECT_FALSE(tier.holds(b->hash));  // not in memory yet
    ASSERT_NE(tier.fetch(b->hash, b->parent_hash, b->tokens.data(), 0), nullptr);
    EXPECT_TRUE(tier.holds(b->hash));
    ASSERT_NE(tier.fetch(b->hash, b->parent_hash, b->tokens.data(), 0), nullptr);
    EXPECT_EQ(tier.stats().file_hits, 1);
    EXPECT_EQ(tier.stats().host_hits, 1);
}

}  // namespace
}  // namespace pagoda::kv
