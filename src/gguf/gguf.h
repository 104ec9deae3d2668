// GGUF v2/v3 files: read (mmap, zero-copy tensor data) and write.
// The reader validates everything before handing out views: magic, version, counts, string lengths,
// value types, nesting depth, alignment, tensor shapes, types, offsets, sizes and overlaps. Any defect
// throws pagoda::Error with a message naming the file, the offending key/tensor and the problem. It
// never allocates more than a small multiple of the file's size, so hostile counts cannot exhaust memory.
// This layer knows nothing of models: keys and tensors are opaque names here.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gguf/ggml_types.h"

namespace pagoda {
class MappedFile;
}

namespace pagoda::gguf {

enum class ValueType : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
    string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* value_type_name(ValueType t);

struct Value;
struct Array {
    ValueType element_type = ValueType::u8;
    std::vector<Value> items;
};

// One metadata value. Integers keep their declared type; the getters below convert where lossless.
struct Value {
    ValueType type = ValueType::u8;
    std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<const Array>> data;

    static Value u8(uint8_t v);
    static Value i8(int8_t v);
    static Value u16(uint16_t v);
    static Value i16(int16_t v);
    static Value u32(uint32_t v);
    static Value i32(int32_t v);
    static Value u64(uint64_t v);
    static Value i64(int64_t v);
    static Value f32(float v);
    static Value f64(double v);
    static Value boolean(bool v);
    static Value string(std::string v);
    static Value array(ValueType element_type, std::vector<Value> items);  // items must match element_type
    static Value strings(const std::vector<std::string>& items);
    static Value f32s(const std::vector<float>& items);
    static Value i32s(const std::vector<int32_t>& items);

    bool is_integer() const;
    bool is_float() const;
    std::optional<int64_t> as_int() const;    // any integer type that fits int64
    std::optional<uint64_t> as_uint() const;  // any non-negative integer
    std::optional<double> as_float() const;   // f32/f64, or any integer
    const std::string* as_string() const;
    const Array* as_array() const;
    std::string to_display(size_t max_items = 8) const;  // short human-readable rendering

    // Same type and same contents (arrays compared element by element; floats compared bit for bit,
    // so a NaN equals the identical NaN). Used by round-trip checks.
    friend bool operator==(const Value& a, const Value& b);
};

// Smallest number of bytes one value of type `t` occupies in a GGUF file (strings: the length
// prefix; arrays: the element type and count). nullopt for an unknown type id.
std::optional<uint64_t> min_encoded_size(uint32_t value_type_id);

struct TensorInfo {
    std::string name;
    GgmlType type = GgmlType::F32;
    std::vector<int64_t> shape;  // GGUF order: shape[0] is the innermost (contiguous) dimension
    uint64_t offset = 0;         // from the start of the data section
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // points into the file mapping (valid while the File lives)
    int64_t n_elements() const;
};

class File {
public:
    // Maps and parses the file. Throws pagoda::Error on any defect.
    static std::unique_ptr<File> open(const std::string& path);
    // Parses a buffer the caller keeps alive (used by the fuzzer and tests). `name` is used in errors.
    static std::unique_ptr<File> parse(const uint8_t* data, size_t size, const std::string& name);
    // A File over metadata and tensors held elsewhere (a Hugging Face folder's view, an in-memory
    // quantisation): each tensor's data points at n_bytes the File keeps alive through `keep_alive`.
    // Validated as a parsed file is: unique names and keys, known types, shapes whose first dimension
    // is whole blocks, n_bytes equal to the size the type and shape imply, non-null data. `mapped`:
    // every tensor's bytes lie in a read-only file mapping (is_mapped(); never for heap memory).
    // `missing_key_notes`: for a missing key starting with a prefix, the getters' error adds the note.
    static std::unique_ptr<File> assemble(std::string name, std::vector<std::pair<std::string, Value>> metadata,
                                          std::vector<TensorInfo> tensors, std::shared_ptr<const void> keep_alive,
                                          bool mapped,
                                          std::vector<std::pair<std::string, std::string>> missing_key_notes = {});
    ~File();

    const std::string& name() const { return name_; }
    // True for open(): tensor data is a read-only file mapping (parse() data is the caller's).
    bool is_mapped() const { return mapping_ != nullptr || assembled_mapped_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // file offset of the tensor data section

    const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
    const Value* find(std::string_view key) const;  // nullptr when absent
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed getters: throw naming the key when it is absent or has a type that does not convert.
    std::string get_string(std::string_view key) const;
    int64_t get_int(std::string_view key) const;
    uint64_t get_uint(std::string_view key) const;
    double get_float(std::string_view key) const;
    bool get_bool(std::string_view key) const;
    std::vector<std::string> get_strings(std::string_view key) const;
    std::vector<float> get_floats(std::string_view key) const;
    std::vector<int64_t> get_ints(std::string_view key) const;
    // ... and defaults for optional keys (a present key of the wrong type still throws).
    std::string get_string_or(std::string_view key, const std::string& fallback) const;
    int64_t get_int_or(std::string_view key, int64_t fallback) const;
    uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
    double get_float_or(std::string_view key, double fallback) const;
    bool get_bool_or(std::string_view key, bool fallback) const;

    // The assemble() note for a missing key (empty when none applies), added to getters' errors.
    std::string missing_key_note(std::string_view key) const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent

private:
    File() = default;
    void parse_all(const uint8_t* data, size_t size);

    std::string name_;
    std::unique_ptr<MappedFile> mapping_;
    std::shared_ptr<const void> keep_alive_;  // assemble(): what the tensor data lives in
    bool assembled_mapped_ = false;
    std::vector<std::pair<std::string, std::string>> missing_key_notes_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, Value>> metadata_;
    std::map<std::string, size_t, std::less<>> metadata_index_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file: metadata in insertion order, tensors laid out in the order added, each
// aligned to general.alignment (default 32). Data is written straight from the caller's buffers.
class Writer {
public:
    void set(const std::string& key, Value value);  // replaces an existing key in place
    // `data` must stay valid until write(); n_bytes must equal the size implied by type and shape.
    void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape, const void* data,
                    uint64_t n_bytes);
    // Same, but the writer keeps the bytes.
    void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
    void write(const std::string& path) const;  // throws on I/O errors; writes to path.tmp then renames
    // The pending model as a File, without writing it (offsets as write() would lay them out). The
    // view shares the writer's owned bytes; borrowed `data` must outlive it as it must outlive write().
    // `keep_alive` is held by the view too (e.g. the File that borrowed tensors point into).
    std::unique_ptr<File> view(const std::string& name, std::shared_ptr<const void> keep_alive = {}) const;

private:
    struct PendingTensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> shape;
        const void* data;
        uint64_t n_bytes;
        std::shared_ptr<std::vector<uint8_t>> owned;
    };
    std::vector<std::pair<std::string, Value>> metadata_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace pagoda::gguf
