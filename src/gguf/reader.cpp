// GGUF parsing: turns bytes into File's metadata and tensor table, validating as it goes. Every read
// is bounds-checked, and every count is checked against the bytes left before anything is reserved,
// so the memory used is bounded by a small multiple of the input size (each encoded value takes at
// least one byte and becomes one Value). Tensor data is never copied: TensorInfo::data points into
// the caller's buffer or the file mapping.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/mapped_file.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

constexpr uint32_t kMaxArrayDepth = 8;  // arrays of arrays nest at most this deep
constexpr uint32_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;             // empty key, type, one-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims, one dim, type, offset

class Parser {
public:
    Parser(const uint8_t* data, size_t size, const std::string& file) : data_(data), size_(size), file_(file) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    void set_context(std::string context) { context_ = std::move(context); }

    template <class... Args>
    [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
        std::string msg = fmt::format(format, std::forward<Args>(args)...);
        if (context_.empty()) fail("{}: {} (at byte {})", file_, msg, pos_);
        fail("{}: {}: {} (at byte {})", file_, context_, msg, pos_);
    }

    const uint8_t* take(uint64_t n, const char* what) {
        if (n > remaining()) error("truncated file: {} needs {} bytes but only {} remain", what, n, remaining());
        const uint8_t* p = data_ + pos_;
        pos_ += size_t(n);
        return p;
    }

    template <class T>
    T read(const char* what) {
        T v;
        std::memcpy(&v, take(sizeof(T), what), sizeof(T));
        return v;
    }

    std::string_view read_string(const char* what) {
        uint64_t len = read<uint64_t>(what);
        if (len > remaining())
            error("{} has length {} but only {} bytes remain in the file", what, len, remaining());
        return {reinterpret_cast<const char*>(take(len, what)), size_t(len)};
    }

    // Throws unless `count` items of at least `min_size` bytes each can fit in what is left.
    void check_count(uint64_t count, uint64_t min_size, const char* what) {
        if (count > remaining() / min_size)
            error("{} count {} cannot fit in the remaining {} bytes (each needs at least {})", what, count,
                  remaining(), min_size);
    }

    ValueType read_value_type(const char* what) {
        uint32_t id = read<uint32_t>(what);
        if (!min_encoded_size(id)) error("unknown value type id {}", id);
        return static_cast<ValueType>(id);
    }

    Value read_value(ValueType type, uint32_t depth) {
        switch (type) {
            case ValueType::u8: return Value::u8(read<uint8_t>("u8 value"));
            case ValueType::i8: return Value::i8(read<int8_t>("i8 value"));
            case ValueType::u16: return Value::u16(read<uint16_t>("u16 value"));
            case ValueType::i16: return Value::i16(read<int16_t>("i16 value"));
            case ValueType::u32: return Value::u32(read<uint32_t>("u32 value"));
            case ValueType::i32: return Value::i32(read<int32_t>("i32 value"));
            case ValueType::u64: return Value::u64(read<uint64_t>("u64 value"));
            case ValueType::i64: return Value::i64(read<int64_t>("i64 value"));
            case ValueType::f32: return Value::f32(read<float>("f32 value"));
            case ValueType::f64: return Value::f64(read<double>("f64 value"));
            case ValueType::boolean: return Value::boolean(read<uint8_t>("bool value") != 0);
            case ValueType::string: return Value::string(std::string(read_string("string value")));
            case ValueType::array: return read_array(depth);
        }
        error("unknown value type id {}", static_cast<uint32_t>(type));
    }

    Value read_array(uint32_t depth) {
        if (depth >= kMaxArrayDepth) error("arrays nested deeper than {} levels", kMaxArrayDepth);
        ValueType element_type = read_value_type("array element type");
        uint64_t count = read<uint64_t>("array length");
        check_count(count, *min_encoded_size(static_cast<uint32_t>(element_type)), "array element");
        // Built directly (not via Value::array) since every element is made with element_type.
        auto arr = std::make_shared<Array>();
        arr->element_type = element_type;
        arr->items.reserve(size_t(count));
        for (uint64_t i = 0; i < count; ++i) arr->items.push_back(read_value(element_type, depth + 1));
        Value v;
        v.type = ValueType::array;
        v.data = std::shared_ptr<const Array>(std::move(arr));
        return v;
    }

private:
    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
    const std::string& file_;
    std::string context_;
};

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

File::~File() = default;

std::unique_ptr<File> File::open(const std::string& path) {
    std::unique_ptr<File> file(new File());
    file->name_ = path;
    file->mapping_ = std::make_unique<MappedFile>(path);
    file->parse_all(file->mapping_->data(), file->mapping_->size());
    return file;
}

std::unique_ptr<File> File::parse(const uint8_t* data, size_t size, const std::string& name) {
    std::unique_ptr<File> file(new File());
    file->name_ = name;
    file->parse_all(data, size);
    return file;
}

void File::parse_all(const uint8_t* data, size_t size) {
    Parser in(data, size, name_);

    // Header.
    if (size < 4) in.error("not a GGUF file: only {} bytes", size);
    static constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
    if (std::memcmp(data, kMagic, 4) != 0)
        in.error("not a GGUF file: bad magic {:02x} {:02x} {:02x} {:02x} (expected 47 47 55 46 \"GGUF\")", data[0],
                 data[1], data[2], data[3]);
    in.take(4, "magic");
    version_ = in.read<uint32_t>("version");
    if (version_ == 1)
        in.error("GGUF version 1 is not supported (an obsolete layout with 32-bit counts); re-convert the model");
    if (version_ != 2 && version_ != 3) in.error("unsupported GGUF version {} (supported: 2 and 3)", version_);
    uint64_t tensor_count = in.read<uint64_t>("tensor count");
    uint64_t kv_count = in.read<uint64_t>("metadata count");
    in.check_count(kv_count, kMinKvBytes, "metadata key/value");

    // Metadata.
    metadata_.reserve(size_t(kv_count));
    for (uint64_t i = 0; i < kv_count; ++i) {
        in.set_context(fmt::format("metadata entry {}", i));
        std::string key(in.read_string("metadata key"));
        in.set_context(fmt::format("metadata key '{}'", key));
        if (metadata_index_.count(key)) in.error("duplicate metadata key");
        ValueType type = in.read_value_type("value type");
        Value value = in.read_value(type, 0);
        metadata_index_.emplace(key, metadata_.size());
        metadata_.emplace_back(std::move(key), std::move(value));
    }
    in.set_context("");

    alignment_ = kDefaultAlignment;
    if (const Value* a = find("general.alignment")) {
        in.set_context("metadata key 'general.alignment'");
        if (a->type != ValueType::u32) in.error("must be a u32, found {}", value_type_name(a->type));
        uint64_t v = *a->as_uint();
        if (v == 0 || (v & (v - 1)) != 0) in.error("must be a non-zero power of two, found {}", v);
        alignment_ = v;
        in.set_context("");
    }

    // Tensor infos.
    in.check_count(tensor_count, kMinTensorInfoBytes, "tensor info");
    tensors_.reserve(size_t(tensor_count));
    for (uint64_t i = 0; i < tensor_count; ++i) {
        in.set_context(fmt::format("tensor {}", i));
        TensorInfo t;
        t.name = std::string(in.read_string("tensor name"));
        in.set_context(fmt::format("tensor '{}'", t.name));
        if (tensor_index_.count(t.name)) in.error("duplicate tensor name");
        uint32_t n_dims = in.read<uint32_t>("dimension count");
        if (n_dims < 1 || n_dims > kMaxDims) in.error("dimension count {} is out of range 1..{}", n_dims, kMaxDims);
        int64_t n_elements = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            int64_t dim = in.read<int64_t>("dimension");
            if (dim <= 0) in.error("dimension {} has size {} (must be positive)", d, dim);
            if (n_elements > std::numeric_limits<int64_t>::max() / dim)
                in.error("shape overflows: element count does not fit in 64 bits");
            n_elements *= dim;
            t.shape.push_back(dim);
        }
        uint32_t type_id = in.read<uint32_t>("tensor type");
        const TypeTraits* traits = type_traits(type_id);
        if (!traits) in.error("unknown GGML tensor type id {}", type_id);
        t.type = static_cast<GgmlType>(type_id);
        if (t.shape[0] % traits->block_size != 0)
            in.error("first dimension {} is not a multiple of the {} block size {}", t.shape[0], traits->name,
                     traits->block_size);
        std::optional<uint64_t> row = row_size(t.type, t.shape[0]);
        if (!row) in.error("byte size overflows 64 bits");
        uint64_t rows = uint64_t(n_elements / t.shape[0]);
        if (*row != 0 && rows > std::numeric_limits<uint64_t>::max() / *row)
            in.error("byte size overflows 64 bits");
        t.n_bytes = *row * rows;
        t.offset = in.read<uint64_t>("tensor data offset");
        if (t.offset % alignment_ != 0)
            in.error("data offset {} is not a multiple of the alignment {}", t.offset, alignment_);
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }
    in.set_context("");

    // Data section: starts at the next alignment boundary after the tensor infos.
    data_offset_ = align_up(in.pos(), alignment_);
    for (TensorInfo& t : tensors_) {
        uint64_t available = data_offset_ <= size ? size - data_offset_ : 0;
        if (t.offset > available || t.n_bytes > available - t.offset)
            fail("{}: tensor '{}': data [{}, {}) of the data section at byte {} extends past the end of the file ({} bytes)",
                 name_, t.name, t.offset, t.offset + t.n_bytes, data_offset_, size);
        t.data = data + data_offset_ + t.offset;
    }
    std::vector<size_t> order(tensors_.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const TensorInfo& prev = tensors_[order[i - 1]];
        const TensorInfo& cur = tensors_[order[i]];
        if (cur.offset < prev.offset + prev.n_bytes)
            fail("{}: tensor '{}' (data at {}..{}) overlaps tensor '{}' (data at {}..{})", name_, cur.name, cur.offset,
                 cur.offset + cur.n_bytes, prev.name, prev.offset, prev.offset + prev.n_bytes);
    }
}

}  // namespace pagoda::gguf
