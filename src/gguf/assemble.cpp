// File::assemble and Writer::view: a File whose metadata and tensors come from elsewhere than a
// GGUF byte stream. The checks are the reader's (names, types, shapes, sizes), so code downstream
// trusts an assembled File exactly as it trusts a parsed one.
#include <fmt/format.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {

std::unique_ptr<File> File::assemble(std::string name, std::vector<std::pair<std::string, Value>> metadata,
                                     std::vector<TensorInfo> tensors, std::shared_ptr<const void> keep_alive,
                                     bool mapped, std::vector<std::pair<std::string, std::string>> missing_key_notes) {
    std::unique_ptr<File> f(new File());
    f->name_ = std::move(name);
    f->version_ = 3;
    f->keep_alive_ = std::move(keep_alive);
    f->assembled_mapped_ = mapped;
    f->missing_key_notes_ = std::move(missing_key_notes);
    for (auto& [key, value] : metadata) {
        if (f->metadata_index_.count(key)) fail("{}: duplicate metadata key '{}'", f->name_, key);
        f->metadata_index_.emplace(key, f->metadata_.size());
        f->metadata_.emplace_back(key, std::move(value));
    }
    if (const Value* a = f->find("general.alignment"))
        if (auto n = a->as_uint(); n && *n > 0) f->alignment_ = *n;
    for (auto& t : tensors) {
        if (t.name.empty()) fail("{}: a tensor has an empty name", f->name_);
        if (f->tensor_index_.count(t.name)) fail("{}: duplicate tensor name '{}'", f->name_, t.name);
        const TypeTraits* traits = type_traits(uint32_t(t.type));
        if (!traits) fail("{}: tensor '{}': unknown GGML type id {}", f->name_, t.name, uint32_t(t.type));
        if (t.shape.empty() || t.shape.size() > 4)
            fail("{}: tensor '{}': {} dimensions (1 to 4 allowed)", f->name_, t.name, t.shape.size());
        uint64_t elements = 1;
        for (int64_t d : t.shape) {
            if (d <= 0) fail("{}: tensor '{}': dimension {} is not positive", f->name_, t.name, d);
            if (elements > UINT64_MAX / uint64_t(d)) fail("{}: tensor '{}': shape overflows", f->name_, t.name);
            elements *= uint64_t(d);
        }
        if (t.shape[0] % traits->block_size != 0)
            fail("{}: tensor '{}': first dimension {} is not a multiple of the {} block size {}", f->name_, t.name,
                 t.shape[0], traits->name, traits->block_size);
        const std::optional<uint64_t> row = row_size(t.type, t.shape[0]);
        const uint64_t rows = elements / uint64_t(t.shape[0]);
        if (!row || (rows && *row > UINT64_MAX / rows)) fail("{}: tensor '{}': byte size overflows", f->name_, t.name);
        if (t.n_bytes != *row * rows)
            fail("{}: tensor '{}': {} bytes given, its type {} and shape imply {}", f->name_, t.name, t.n_bytes,
                 traits->name, *row * rows);
        if (!t.data) fail("{}: tensor '{}' has no data", f->name_, t.name);
        f->tensor_index_.emplace(t.name, f->tensors_.size());
        f->tensors_.push_back(std::move(t));
    }
    return f;
}

std::string File::missing_key_note(std::string_view key) const {
    for (const auto& [prefix, note] : missing_key_notes_)
        if (key.substr(0, prefix.size()) == prefix) return note;
    return "";
}

std::unique_ptr<File> Writer::view(const std::string& name, std::shared_ptr<const void> keep_alive) const {
    uint64_t alignment = 32;
    for (const auto& [key, value] : metadata_)
        if (key == "general.alignment")
            if (auto n = value.as_uint(); n && *n > 0) alignment = *n;
    std::vector<TensorInfo> tensors;
    struct Held {
        std::vector<std::shared_ptr<std::vector<uint8_t>>> owned;
        std::shared_ptr<const void> other;
    };
    auto held = std::make_shared<Held>();
    held->other = std::move(keep_alive);
    uint64_t offset = 0;
    for (const PendingTensor& p : tensors_) {
        TensorInfo t;
        t.name = p.name;
        t.type = p.type;
        t.shape = p.shape;
        t.offset = offset;
        t.n_bytes = p.n_bytes;
        t.data = static_cast<const uint8_t*>(p.data);
        if (p.owned) held->owned.push_back(p.owned);
        offset = (offset + p.n_bytes + alignment - 1) / alignment * alignment;
        tensors.push_back(std::move(t));
    }
    return File::assemble(name, metadata_, std::move(tensors), held, false);
}

}  // namespace pagoda::gguf
