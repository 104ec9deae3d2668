#include "hf/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"

namespace pagoda::hf {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

namespace {

using gguf::GgmlType;
using Json = nlohmann::json;

// The safetensors reference implementation refuses headers above 100 MB; so do we, before parsing.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct Dtype {
    const char* name;
    int size;
    bool supported;
    GgmlType type;
};
// Every dtype the safetensors format defines, so an unsupported one is named as such, not "unknown".
constexpr Dtype kDtypes[] = {
    {"F32", 4, true, GgmlType::F32},    {"F16", 2, true, GgmlType::F16},    {"BF16", 2, true, GgmlType::BF16},
    {"F64", 8, false, GgmlType::F32},   {"I64", 8, false, GgmlType::F32},   {"U64", 8, false, GgmlType::F32},
    {"I32", 4, false, GgmlType::F32},   {"U32", 4, false, GgmlType::F32},   {"I16", 2, false, GgmlType::F32},
    {"U16", 2, false, GgmlType::F32},   {"I8", 1, false, GgmlType::F32},    {"U8", 1, true, GgmlType::I8},
    {"BOOL", 1, false, GgmlType::F32},  {"F8_E4M3", 1, false, GgmlType::F32}, {"F8_E5M2", 1, false, GgmlType::F32},
    {"F8_E8M0", 1, false, GgmlType::F32}, {"F6_E2M3", 1, false, GgmlType::F32}, {"F6_E3M2", 1, false, GgmlType::F32},
    {"F4", 1, false, GgmlType::F32},
};

uint64_t element_size(GgmlType t) { return t == GgmlType::F32 ? 4 : t == GgmlType::I8 ? 1 : 2; }

}  // namespace

int64_t SafetensorsTensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;  // the reader rejected shapes whose product overflows
    return n;
}

const char* safetensors_dtype_name(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return "F32";
        case GgmlType::F16: return "F16";
        case GgmlType::BF16: return "BF16";
        case GgmlType::I8: return "U8";  // raw bytes: gpt-oss's MXFP4 blocks and scales
        default: fail("safetensors holds F32, F16, BF16 or U8 tensors, not {}", gguf::type_name(uint32_t(type)));
    }
}

SafetensorsFile::~SafetensorsFile() = default;

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
    std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
    f->name_ = path;
    f->mapping_ = std::make_unique<MappedFile>(path);
    f->parse_all(f->mapping_->data(), f->mapping_->size());
    return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& name) {
    std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
    f->name_ = name;
    f->parse_all(data, size);
    return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse_all(const uint8_t* data, size_t size) {
    if (size < 8) fail("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", name_, size);
    uint64_t header_len = 0;
    std::memcpy(&header_len, data, 8);
    if (header_len > kMaxHeaderBytes) fail("{}: safetensors header length {} is over the 100 MB limit", name_, header_len);
    if (header_len > size - 8)
        fail("{}: safetensors header length {} runs past the end of the file ({} bytes)", name_, header_len, size);
    const std::string_view text(reinterpret_cast<const char*>(data + 8), size_t(header_len));
    Json header;
    // nlohmann keeps the last of two equal keys; a callback sees every top-level key to refuse that.
    std::vector<std::string> top_keys;
    auto seen = [&](int depth, Json::parse_event_t event, Json& parsed) {
        if (depth == 1 && event == Json::parse_event_t::key) top_keys.push_back(parsed.get<std::string>());
        return true;
    };
    try {
        header = Json::parse(text, seen);
    } catch (const Json::exception& e) {
        fail("{}: the safetensors header is not valid JSON ({})", name_, e.what());
    }
    if (!header.is_object()) fail("{}: the safetensors header is not a JSON object", name_);
    std::sort(top_keys.begin(), top_keys.end());
    if (auto d = std::adjacent_find(top_keys.begin(), top_keys.end()); d != top_keys.end())
        fail("{}: tensor '{}' appears twice in the header", name_, *d);
    const uint8_t* section = data + 8 + header_len;
    const uint64_t section_size = size - 8 - header_len;

    struct Range {
        uint64_t begin, end;
        size_t tensor;
    };
    std::vector<Range> ranges;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object()) fail("{}: __metadata__ is not a JSON object", name_);
            for (const auto& [k, v] : entry.items()) {
                if (!v.is_string()) fail("{}: __metadata__ value '{}' is not a string", name_, k);
                metadata_[k] = v.get<std::string>();
            }
            continue;
        }
        if (name.empty()) fail("{}: a tensor has an empty name", name_);
        if (index_.count(name)) fail("{}: tensor '{}' appears twice", name_, name);
        if (!entry.is_object()) fail("{}: tensor '{}': its entry is not a JSON object", name_, name);
        for (const auto& [k, v] : entry.items())
            if (k != "dtype" && k != "shape" && k != "data_offsets") fail("{}: tensor '{}': unknown field '{}'", name_, name, k);
        const auto dtype = entry.find("dtype");
        const auto shape = entry.find("shape");
        const auto offsets = entry.find("data_offsets");
        if (dtype == entry.end() || !dtype->is_string()) fail("{}: tensor '{}': 'dtype' is missing or not a string", name_, name);
        if (shape == entry.end() || !shape->is_array()) fail("{}: tensor '{}': 'shape' is missing or not an array", name_, name);
        if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2)
            fail("{}: tensor '{}': 'data_offsets' is missing or not [begin, end]", name_, name);
        const std::string dtype_name = dtype->get<std::string>();
        const Dtype* dt = nullptr;
        for (const Dtype& d : kDtypes)
            if (dtype_name == d.name) dt = &d;
        if (!dt) fail("{}: tensor '{}': unknown dtype '{}'", name_, name, dtype_name);
        if (!dt->supported)
            fail("{}: tensor '{}': dtype {} is not supported (pagoda reads F32, F16, BF16 and U8 safetensors)", name_, name,
                 dtype_name);
        SafetensorsTensor t;
        t.name = name;
        t.type = dt->type;
        uint64_t elements = 1;
        for (const auto& d : *shape) {
            if (!d.is_number_unsigned()) fail("{}: tensor '{}': a shape entry is not a non-negative integer", name_, name);
            const uint64_t n = d.get<uint64_t>();
            if (n > uint64_t(INT64_MAX) || (n && elements > uint64_t(INT64_MAX) / n))
                fail("{}: tensor '{}': the shape's element count overflows", name_, name);
            elements *= n;
            t.shape.push_back(int64_t(n));
        }
        if (t.shape.size() > 8) fail("{}: tensor '{}': {} dimensions (at most 8)", name_, name, t.shape.size());
        for (const auto& o : *offsets)
            if (!o.is_number_unsigned()) fail("{}: tensor '{}': data_offsets holds a value that is not a non-negative integer", name_, name);
        const uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
        if (begin > end) fail("{}: tensor '{}': data_offsets [{}, {}] run backwards", name_, name, begin, end);
        if (end > section_size)
            fail("{}: tensor '{}': data [{}, {}) runs past the data section ({} bytes)", name_, name, begin, end, section_size);
        const uint64_t want = elements * element_size(t.type);  // used only when it does not overflow
        if (elements > UINT64_MAX / element_size(t.type) || end - begin != want)
            fail("{}: tensor '{}': shape [{}] of {} needs {} bytes, data_offsets give {}", name_, name,
                 fmt::join(t.shape, ", "), dtype_name, elements * element_size(t.type), end - begin);
        t.data = section + begin;
        t.n_bytes = end - begin;
        ranges.push_back({begin, end, tensors_.size()});
        index_.emplace(name, tensors_.size());
        tensors_.push_back(std::move(t));
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered = 0;
    for (size_t i = 0; i < ranges.size(); ++i) {
        const Range& r = ranges[i];
        if (i > 0 && r.begin < ranges[i - 1].end)
            fail("{}: tensor '{}' (data [{}, {})) overlaps tensor '{}' (data [{}, {}))", name_, tensors_[r.tensor].name,
                 r.begin, r.end, tensors_[ranges[i - 1].tensor].name, ranges[i - 1].begin, ranges[i - 1].end);
        if (r.begin != covered)
            fail("{}: the data section has a hole at [{}, {}) before tensor '{}'", name_, covered, r.begin,
                 tensors_[r.tensor].name);
        covered = r.end;
    }
    if (covered != section_size)
        fail("{}: the data section has {} bytes after its last tensor", name_, section_size - covered);
    // Header order is JSON object order (nlohmann sorts keys); report tensors by data offset instead,
    // which is the order the file was written in.
    std::vector<SafetensorsTensor> ordered;
    ordered.reserve(tensors_.size());
    index_.clear();
    for (const Range& r : ranges) {
        index_.emplace(tensors_[r.tensor].name, ordered.size());
        ordered.push_back(std::move(tensors_[r.tensor]));
    }
    tensors_ = std::move(ordered);
}

std::vector<uint8_t> encode_safetensors(const std::vector<SafetensorsEntry>& tensors,
                                        const std::map<std::string, std::string>& metadata) {
    Json header = Json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (header.contains(t.name)) fail("safetensors writer: tensor '{}' is given twice", t.name);
        uint64_t elements = 1;
        for (int64_t d : t.shape) {
            if (d < 0) fail("safetensors writer: tensor '{}' has a negative dimension", t.name);
            elements *= uint64_t(d);
        }
        if (elements * element_size(t.type) != t.bytes.size() || safetensors_dtype_name(t.type) == nullptr)
            fail("safetensors writer: tensor '{}' has {} bytes, its shape needs {}", t.name, t.bytes.size(),
                 elements * element_size(t.type));
        header[t.name] = {{"dtype", safetensors_dtype_name(t.type)},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + t.bytes.size()}}};
        offset += t.bytes.size();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
    std::vector<uint8_t> out(8 + text.size() + offset);
    const uint64_t len = text.size();
    std::memcpy(out.data(), &len, 8);
    std::memcpy(out.data() + 8, text.data(), text.size());
    uint8_t* p = out.data() + 8 + text.size();
    for (const auto& t : tensors) {
        if (!t.bytes.empty()) std::memcpy(p, t.bytes.data(), t.bytes.size());
        p += t.bytes.size();
    }
    return out;
}

namespace {

void write_bytes(const std::string& path, const void* data, size_t size) {
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail("cannot write {}: {}", path, std::strerror(errno));
    const bool ok = (size == 0 || std::fwrite(data, 1, size, f) == size) && std::fflush(f) == 0;
    const int err = errno;
    if (std::fclose(f) != 0 || !ok) {
        std::remove(tmp.c_str());
        fail("cannot write {}: {}", path, std::strerror(ok ? errno : err));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        fail("cannot write {}: {}", path, std::strerror(errno));
    }
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    const std::vector<uint8_t> bytes = encode_safetensors(tensors, metadata);
    write_bytes(path, bytes.data(), bytes.size());
}

void write_text_file(const std::string& path, const std::string& text) { write_bytes(path, text.data(), text.size()); }

}  // namespace pagoda::hf
