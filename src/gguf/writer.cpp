// GGUF v3 writer. The header (metadata + tensor infos) is encoded into memory, then tensor bytes are
// streamed from the caller's buffers with zero padding up to the alignment. The file is written to
// `path.tmp` and renamed into place, so readers never see a half-written file. Everything the reader
// would reject (bad values, shapes, sizes, alignment) is rejected here first.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "the GGUF writer assumes a little-endian host");

constexpr uint32_t kMaxArrayDepth = 8;  // must match the reader
constexpr uint64_t kDefaultAlignment = 32;

class Encoder {
public:
    template <class T>
    void put(T v) {
        char bytes[sizeof(T)];
        std::memcpy(bytes, &v, sizeof(T));
        out_.append(bytes, sizeof(T));
    }
    void put_string(const std::string& s) {
        put<uint64_t>(s.size());
        out_.append(s);
    }
    std::string& bytes() { return out_; }

    void put_value(const std::string& key, const Value& v, uint32_t depth) {
        auto unsigned_in = [&](uint64_t max) {
            const uint64_t* u = std::get_if<uint64_t>(&v.data);
            if (!u || *u > max) bad(key, v);
            return *u;
        };
        auto signed_in = [&](int64_t min, int64_t max) {
            const int64_t* i = std::get_if<int64_t>(&v.data);
            if (!i || *i < min || *i > max) bad(key, v);
            return *i;
        };
        auto floating = [&] {
            const double* d = std::get_if<double>(&v.data);
            if (!d) bad(key, v);
            return *d;
        };
        switch (v.type) {
            case ValueType::u8: put(uint8_t(unsigned_in(UINT8_MAX))); return;
            case ValueType::u16: put(uint16_t(unsigned_in(UINT16_MAX))); return;
            case ValueType::u32: put(uint32_t(unsigned_in(UINT32_MAX))); return;
            case ValueType::u64: put(unsigned_in(UINT64_MAX)); return;
            case ValueType::i8: put(int8_t(signed_in(INT8_MIN, INT8_MAX))); return;
            case ValueType::i16: put(int16_t(signed_in(INT16_MIN, INT16_MAX))); return;
            case ValueType::i32: put(int32_t(signed_in(INT32_MIN, INT32_MAX))); return;
            case ValueType::i64: put(signed_in(INT64_MIN, INT64_MAX)); return;
            case ValueType::f32: put(float(floating())); return;
            case ValueType::f64: put(floating()); return;
            case ValueType::boolean: {
                const bool* b = std::get_if<bool>(&v.data);
                if (!b) bad(key, v);
                put(uint8_t(*b ? 1 : 0));
                return;
            }
            case ValueType::string: {
                const std::string* s = v.as_string();
                if (!s) bad(key, v);
                put_string(*s);
                return;
            }
            case ValueType::array: {
                const Array* a = v.as_array();
                if (!a) bad(key, v);
                if (depth >= kMaxArrayDepth) fail("GGUF writer: key '{}': arrays nested deeper than {} levels", key, kMaxArrayDepth);
                if (!min_encoded_size(static_cast<uint32_t>(a->element_type)))
                    fail("GGUF writer: key '{}': unknown array element type id {}", key, static_cast<uint32_t>(a->element_type));
                put(static_cast<uint32_t>(a->element_type));
                put<uint64_t>(a->items.size());
                for (size_t i = 0; i < a->items.size(); ++i) {
                    if (a->items[i].type != a->element_type)
                        fail("GGUF writer: key '{}': array of {} holds a {} at index {}", key,
                             value_type_name(a->element_type), value_type_name(a->items[i].type), i);
                    put_value(key, a->items[i], depth + 1);
                }
                return;
            }
        }
        fail("GGUF writer: key '{}': unknown value type id {}", key, static_cast<uint32_t>(v.type));
    }

private:
    [[noreturn]] static void bad(const std::string& key, const Value& v) {
        fail("GGUF writer: key '{}': value does not hold a valid {}", key, value_type_name(v.type));
    }
    std::string out_;
};

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Owns the temporary file until it is renamed, removing it if anything fails on the way.
class TempFile {
public:
    TempFile(std::string final_path) : final_(std::move(final_path)), temp_(final_ + ".tmp") {
        f_ = std::fopen(temp_.c_str(), "wb");
        if (!f_) fail("cannot create '{}': {}", temp_, std::strerror(errno));
    }
    ~TempFile() {
        if (f_) std::fclose(f_);
        if (!committed_) std::remove(temp_.c_str());
    }
    void write(const void* p, size_t n) {
        if (n && std::fwrite(p, 1, n, f_) != n) fail("cannot write '{}': {}", temp_, std::strerror(errno));
    }
    void commit() {
        int rc = std::fclose(f_);
        f_ = nullptr;
        if (rc != 0) fail("cannot write '{}': {}", temp_, std::strerror(errno));
        if (std::rename(temp_.c_str(), final_.c_str()) != 0)
            fail("cannot rename '{}' to '{}': {}", temp_, final_, std::strerror(errno));
        committed_ = true;
    }

private:
    std::string final_;
    std::string temp_;
    std::FILE* f_ = nullptr;
    bool committed_ = false;
};

}  // namespace

void Writer::set(const std::string& key, Value value) {
    for (auto& [k, v] : metadata_)
        if (k == key) {
            v = std::move(value);
            return;
        }
    metadata_.emplace_back(key, std::move(value));
}

void Writer::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape, const void* data,
                        uint64_t n_bytes) {
    for (const PendingTensor& t : tensors_)
        if (t.name == name) fail("GGUF writer: duplicate tensor name '{}'", name);
    const TypeTraits* traits = type_traits(static_cast<uint32_t>(type));
    if (!traits) fail("GGUF writer: tensor '{}': unknown GGML type id {}", name, static_cast<uint32_t>(type));
    if (shape.empty() || shape.size() > 4)
        fail("GGUF writer: tensor '{}': dimension count {} is out of range 1..4", name, shape.size());
    int64_t n_elements = 1;
    for (int64_t d : shape) {
        if (d <= 0) fail("GGUF writer: tensor '{}': dimension size {} must be positive", name, d);
        if (n_elements > std::numeric_limits<int64_t>::max() / d)
            fail("GGUF writer: tensor '{}': element count overflows 64 bits", name);
        n_elements *= d;
    }
    if (shape[0] % traits->block_size != 0)
        fail("GGUF writer: tensor '{}': first dimension {} is not a multiple of the {} block size {}", name, shape[0],
             traits->name, traits->block_size);
    std::optional<uint64_t> row = row_size(type, shape[0]);
    if (!row) fail("GGUF writer: tensor '{}': byte size overflows 64 bits", name);
    uint64_t rows = uint64_t(n_elements / shape[0]);
    if (rows > std::numeric_limits<uint64_t>::max() / *row)
        fail("GGUF writer: tensor '{}': byte size overflows 64 bits", name);
    if (*row * rows != n_bytes)
        fail("GGUF writer: tensor '{}': {} bytes given but a {} tensor of this shape needs {}", name, n_bytes,
             traits->name, *row * rows);
    if (!data && n_bytes) fail("GGUF writer: tensor '{}': no data", name);
    tensors_.push_back(PendingTensor{name, type, std::move(shape), data, n_bytes, nullptr});
}

void Writer::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    add_tensor(name, type, std::move(shape), owned->data(), owned->size());
    tensors_.back().owned = std::move(owned);
}

void Writer::write(const std::string& path) const {
    uint64_t alignment = kDefaultAlignment;
    for (const auto& [key, value] : metadata_) {
        if (key != "general.alignment") continue;
        auto a = value.as_uint();
        if (value.type != ValueType::u32 || !a || *a == 0 || (*a & (*a - 1)) != 0)
            fail("GGUF writer: general.alignment must be a u32 non-zero power of two, got {} {}",
                 value_type_name(value.type), value.to_display());
        alignment = *a;
    }

    Encoder header;
    header.bytes().append("GGUF", 4);
    header.put<uint32_t>(3);
    header.put<uint64_t>(tensors_.size());
    header.put<uint64_t>(metadata_.size());
    for (const auto& [key, value] : metadata_) {
        header.put_string(key);
        header.put(static_cast<uint32_t>(value.type));
        header.put_value(key, value, 0);
    }
    std::vector<uint64_t> offsets;
    uint64_t offset = 0;
    for (const PendingTensor& t : tensors_) {
        header.put_string(t.name);
        header.put<uint32_t>(uint32_t(t.shape.size()));
        for (int64_t d : t.shape) header.put<int64_t>(d);
        header.put(static_cast<uint32_t>(t.type));
        header.put<uint64_t>(offset);
        offsets.push_back(offset);
        offset = align_up(offset + t.n_bytes, alignment);
    }

    static const std::vector<uint8_t> zeros(4096, 0);
    auto pad = [&](TempFile& out, uint64_t n) {
        while (n) {
            size_t chunk = size_t(std::min<uint64_t>(n, zeros.size()));
            out.write(zeros.data(), chunk);
            n -= chunk;
        }
    };

    TempFile out(path);
    std::string& bytes = header.bytes();
    out.write(bytes.data(), bytes.size());
    // The data section starts aligned; only pad when there is a data section at all.
    if (!tensors_.empty()) pad(out, align_up(bytes.size(), alignment) - bytes.size());
    uint64_t written = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        pad(out, offsets[i] - written);
        out.write(tensors_[i].data, size_t(tensors_[i].n_bytes));
        written = offsets[i] + tensors_[i].n_bytes;
    }
    pad(out, offset - written);  // like llama.cpp, pad the last tensor too: readers may load whole blocks
    out.commit();
}

}  // namespace pagoda::gguf
