// `pagoda gguf-info FILE [--all]`: what a GGUF file holds — header, metadata and tensor table — for
// users checking a download and for debugging loaders. Long arrays and strings are shortened
// unless --all is given.
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <limits>

#include "apps/command.h"
#include "gguf/gguf.h"
#include "model/model_file.h"

namespace pagoda::app {
namespace {

std::string type_label(const gguf::Value& v) {
    if (const gguf::Array* a = v.as_array())
        return fmt::format("array[{};{}]", gguf::value_type_name(a->element_type), a->items.size());
    return gguf::value_type_name(v.type);
}

std::string shape_label(const std::vector<int64_t>& shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

int run(const std::string& path, bool all) {
    auto file = model::open_model_file(path);
    const size_t max_items = all ? std::numeric_limits<size_t>::max() : 8;
    if (std::filesystem::is_directory(path))
        std::printf("folder: %s (Hugging Face model, shown as the GGUF view pagoda loads)\n", path.c_str());
    else
        std::printf("file: %s (%ju bytes)\n", path.c_str(), uintmax_t(std::filesystem::file_size(path)));
    std::printf("version: %u\n", file->version());
    std::printf("alignment: %ju\n", uintmax_t(file->alignment()));
    std::printf("data offset: %ju\n", uintmax_t(file->data_offset()));

    std::printf("\nmetadata: %zu keys\n", file->metadata().size());
    size_t key_width = 0;
    for (const auto& [key, value] : file->metadata()) key_width = std::max(key_width, key.size());
    for (const auto& [key, value] : file->metadata())
        std::printf("  %-*s  %-20s  %s\n", int(key_width), key.c_str(), type_label(value).c_str(),
                    value.to_display(max_items).c_str());

    std::printf("\ntensors: %zu\n", file->tensors().size());
    size_t name_width = 4;
    for (const auto& t : file->tensors()) name_width = std::max(name_width, t.name.size());
    if (!file->tensors().empty())
        std::printf("  %-*s  %-7s  %-24s  %12s  %12s\n", int(name_width), "name", "type", "shape", "offset", "bytes");
    uint64_t total_bytes = 0;
    int64_t total_elements = 0;
    for (const auto& t : file->tensors()) {
        std::printf("  %-*s  %-7s  %-24s  %12ju  %12ju\n", int(name_width), t.name.c_str(),
                    gguf::type_name(static_cast<uint32_t>(t.type)).c_str(), shape_label(t.shape).c_str(),
                    uintmax_t(t.offset), uintmax_t(t.n_bytes));
        total_bytes += t.n_bytes;
        // Saturate: a file of many huge tensors could exceed int64 in total (each one fits).
        total_elements = t.n_elements() > std::numeric_limits<int64_t>::max() - total_elements
                             ? std::numeric_limits<int64_t>::max()
                             : total_elements + t.n_elements();
    }
    std::printf("\ntotal: %zu tensors, %jd elements, %ju bytes (%.2f MiB)\n", file->tensors().size(),
                intmax_t(total_elements), uintmax_t(total_bytes), double(total_bytes) / (1024.0 * 1024.0));
    return 0;
}

CommandRegistration reg("gguf-info", "Show a GGUF file's header, metadata and tensors (a Hugging Face folder: its GGUF view)", [](CLI::App& sub) {
    auto path = std::make_shared<std::string>();
    auto all = std::make_shared<bool>(false);
    sub.add_option("file", *path, "GGUF file or Hugging Face model folder")->required();
    sub.add_flag("--all", *all, "Print arrays and strings in full");
    return [path, all] { return run(*path, *all); };
});

}  // namespace
}  // namespace pagoda::app
