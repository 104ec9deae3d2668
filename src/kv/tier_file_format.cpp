#include "kv/tier_file_format.h"

#include <cstring>
#include <fmt/format.h>

namespace pagoda::kv {
namespace {

constexpr char kMagic[8] = {'P', 'A', 'G', 'O', 'D', 'A', 'K', 'V'};
constexpr size_t kBackendChars = 32;

template <class T>
void put(std::vector<uint8_t>& out, size_t at, T v) {
    std::memcpy(out.data() + at, &v, sizeof v);
}
template <class T>
T get(std::span<const uint8_t> in, size_t at) {
    T v;
    std::memcpy(&v, in.data() + at, sizeof v);
    return v;
}

uint64_t body_checksum(const TierBlock& b) {
    const uint64_t t = checksum64(b.tokens.data(), b.tokens.size() * sizeof(int32_t), 0x746f6b656e73ull);
    return checksum64(b.payload.data(), b.payload.size(), t);
}

}  // namespace

std::vector<uint8_t> encode_tier_file(const TierIdentity& id, const TierBlock& b) {
    const size_t token_bytes = b.tokens.size() * sizeof(int32_t);
    std::vector<uint8_t> out(kTierFileHeaderBytes + token_bytes + b.payload.size(), 0);
    std::memcpy(out.data(), kMagic, sizeof kMagic);
    put<uint32_t>(out, 8, kTierFileVersion);
    put<uint32_t>(out, 12, uint32_t(kTierFileHeaderBytes));
    put<uint64_t>(out, 16, id.digest());
    put<uint64_t>(out, 24, id.model_key);
    put<int32_t>(out, 32, id.layout.n_layers);
    put<int32_t>(out, 36, id.layout.n_kv_heads);
    put<int32_t>(out, 40, id.layout.head_dim);
    put<int32_t>(out, 44, id.layout.block_size);
    put<int32_t>(out, 48, int32_t(id.layout.dtype));
    const size_t name_len = std::min(id.backend.size(), kBackendChars);
    put<uint32_t>(out, 52, uint32_t(name_len));
    std::memcpy(out.data() + 56, id.backend.data(), name_len);
    put<uint64_t>(out, 88, b.hash);
    put<uint64_t>(out, 96, b.parent_hash);
    put<uint64_t>(out, 104, b.extra_key);
    put<uint64_t>(out, 112, uint64_t(b.payload.size()));
    put<uint64_t>(out, 120, body_checksum(b));
    std::memcpy(out.data() + kTierFileHeaderBytes, b.tokens.data(), token_bytes);
    if (!b.payload.empty()) std::memcpy(out.data() + kTierFileHeaderBytes + token_bytes, b.payload.data(), b.payload.size());
    return out;
}

std::string parse_tier_header(std::span<const uint8_t> head, TierFileHeader& out) {
    if (head.size() < kTierFileHeaderBytes)
        return fmt::format("truncated header ({} of {} bytes)", head.size(), kTierFileHeaderBytes);
    if (std::memcmp(head.data(), kMagic, sizeof kMagic) != 0) return "bad magic (not a pagoda KV block file)";
    if (const auto v = get<uint32_t>(head, 8); v != kTierFileVersion)
        return fmt::format("format version {}, expected {}", v, kTierFileVersion);
    if (get<uint32_t>(head, 12) != kTierFileHeaderBytes) return "bad header length";
    const int32_t block_size = get<int32_t>(head, 44);
    const uint64_t payload = get<uint64_t>(head, 112);
    if (block_size < 1 || block_size > kMaxBlockSize) return fmt::format("bad block size {}", block_size);
    if (payload == 0 || payload > (uint64_t(1) << 40)) return fmt::format("bad payload length {}", payload);
    out.identity_digest = get<uint64_t>(head, 16);
    out.hash = get<uint64_t>(head, 88);
    out.file_bytes = kTierFileHeaderBytes + uint64_t(block_size) * sizeof(int32_t) + payload;
    return {};
}

std::shared_ptr<TierBlock> decode_tier_file(std::span<const uint8_t> bytes, const TierIdentity& id, uint64_t hash,
                                            std::string& error) {
    TierFileHeader h;
    error = parse_tier_header(bytes, h);
    if (!error.empty()) return nullptr;
    const uint32_t name_len = get<uint32_t>(bytes, 52);
    const std::string backend(reinterpret_cast<const char*>(bytes.data()) + 56, std::min<size_t>(name_len, kBackendChars));
    if (get<uint64_t>(bytes, 24) != id.model_key || backend != id.backend) {
        error = "made for another model";
        return nullptr;
    }
    if (get<int32_t>(bytes, 32) != id.layout.n_layers || get<int32_t>(bytes, 36) != id.layout.n_kv_heads ||
        get<int32_t>(bytes, 40) != id.layout.head_dim || get<int32_t>(bytes, 44) != id.layout.block_size ||
        get<int32_t>(bytes, 48) != int32_t(id.layout.dtype) || get<uint64_t>(bytes, 112) != id.bytes_per_block) {
        error = "made for another KV layout";
        return nullptr;
    }
    if (h.identity_digest != id.digest()) {
        error = "identity digest does not match its fields";
        return nullptr;
    }
    if (h.hash != hash) {
        error = fmt::format("holds block {:016x}, not {:016x}", h.hash, hash);
        return nullptr;
    }
    if (bytes.size() != h.file_bytes) {
        error = fmt::format("{} bytes long, expected {} (truncated or padded)", bytes.size(), h.file_bytes);
        return nullptr;
    }
    auto b = std::make_shared<TierBlock>();
    b->hash = h.hash;
    b->parent_hash = get<uint64_t>(bytes, 96);
    b->extra_key = get<uint64_t>(bytes, 104);
    b->tokens.resize(size_t(id.layout.block_size));
    std::memcpy(b->tokens.data(), bytes.data() + kTierFileHeaderBytes, b->tokens.size() * sizeof(int32_t));
    const size_t payload_at = kTierFileHeaderBytes + b->tokens.size() * sizeof(int32_t);
    b->payload.assign(bytes.begin() + ptrdiff_t(payload_at), bytes.end());
    if (body_checksum(*b) != get<uint64_t>(bytes, 120)) {
        error = "checksum mismatch (the payload or tokens were altered)";
        return nullptr;
    }
    if (!b->hash_consistent()) {
        error = "the block hash is not the hash of its tokens";
        return nullptr;
    }
    return b;
}

}  // namespace pagoda::kv
