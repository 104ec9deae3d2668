// One safetensors file: an 8-byte little-endian header length N, N bytes of JSON
// `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {string: string}}`, then
// the data section the offsets index. The reader validates everything before handing out views —
// header length against the file, the JSON's shape, dtype (F32, F16 and BF16 are read, and U8 as
// GgmlType::I8 for gpt-oss's MXFP4 blocks and scales; other safetensors dtypes are refused by name), shape product × element size == byte range, ranges inside
// the data section, covering it without holes or overlaps, unique names — and throws pagoda::Error
// naming the file and the tensor. Tensor data is zero-copy: views into the file mapping.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_types.h"

namespace pagoda {
class MappedFile;
}

namespace pagoda::hf {

struct SafetensorsTensor {
    std::string name;
    gguf::GgmlType type = gguf::GgmlType::F32;  // F32, F16, BF16 or I8 (safetensors' U8)
    std::vector<int64_t> shape;                 // safetensors (row-major) order: shape.back() is contiguous
    const uint8_t* data = nullptr;
    uint64_t n_bytes = 0;
    int64_t n_elements() const;
};

class SafetensorsFile {
public:
    static std::unique_ptr<SafetensorsFile> open(const std::string& path);  // maps the file
    // Parses a buffer the caller keeps alive (fuzzer, tests); `name` is used in errors.
    static std::unique_ptr<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& name);
    ~SafetensorsFile();

    const std::string& name() const { return name_; }
    bool is_mapped() const { return mapping_ != nullptr; }
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in header order
    const SafetensorsTensor* find(std::string_view name) const;                 // nullptr when absent
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

private:
    SafetensorsFile() = default;
    void parse_all(const uint8_t* data, size_t size);

    std::string name_;
    std::unique_ptr<MappedFile> mapping_;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, size_t, std::less<>> index_;
    std::map<std::string, std::string> metadata_;
};

// One tensor to write; `bytes` must hold exactly the elements of `shape` in `type` (F32/F16/BF16, I8 as U8).
struct SafetensorsEntry {
    std::string name;
    gguf::GgmlType type = gguf::GgmlType::F32;
    std::vector<int64_t> shape;  // row-major, as the reader reports it
    std::span<const uint8_t> bytes;
};

// The file's bytes: header padded with spaces to a multiple of 8, tensors in the order given.
std::vector<uint8_t> encode_safetensors(const std::vector<SafetensorsEntry>& tensors,
                                        const std::map<std::string, std::string>& metadata = {});
// Writes them to path.tmp, then renames into place. Throws naming the path on I/O errors.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Writes any small file (config.json, the index) the same way.
void write_text_file(const std::string& path, const std::string& text);

// The safetensors name of F32 / F16 / BF16 / I8 ("F32", "F16", "BF16", "U8"); throws for other types.
const char* safetensors_dtype_name(gguf::GgmlType type);

}  // namespace pagoda::hf
