// Test helper: spells GGUF files out byte by byte, independently of pagoda's writer, so tests can
// build exact golden files and deliberately malformed ones.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pagoda::gguf::test {

struct Bytes {
    std::vector<uint8_t> b;

    template <class T>
    Bytes& put(T v) {
        uint8_t raw[sizeof(T)];
        std::memcpy(raw, &v, sizeof(T));  // tests run on little-endian hosts, like the format
        b.insert(b.end(), raw, raw + sizeof(T));
        return *this;
    }
    Bytes& u8(uint8_t v) { return put(v); }
    Bytes& u32(uint32_t v) { return put(v); }
    Bytes& u64(uint64_t v) { return put(v); }
    Bytes& i64(int64_t v) { return put(v); }
    Bytes& raw(const std::string& s) {
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Bytes& str(const std::string& s) { return u64(s.size()).raw(s); }
    Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
    }
    Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
    Bytes& kv_str(const std::string& key, const std::string& v) { return str(key).u32(8).str(v); }
    // A tensor info with the given dims (GGUF order), type id and offset.
    Bytes& tensor(const std::string& name, std::vector<int64_t> dims, uint32_t type, uint64_t offset) {
        str(name).u32(uint32_t(dims.size()));
        for (int64_t d : dims) i64(d);
        return u32(type).u64(offset);
    }
    Bytes& pad_to(size_t alignment) {
        while (b.size() % alignment) b.push_back(0);
        return *this;
    }
    Bytes& zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
};

}  // namespace pagoda::gguf::test
