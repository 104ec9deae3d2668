#include "apps/serve_models.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "server/models_json.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/kv_options.h"

namespace pagoda::app {

namespace fs = std::filesystem;

namespace {

bool is_model_path(const fs::path& p) { return fs::is_regular_file(p) || fs::is_directory(p); }

std::string id_of_path(const fs::path& p) {
    fs::path clean = p.lexically_normal();
    if (clean.filename().empty()) clean = clean.parent_path();  // "dir/" names the folder
    return fs::is_directory(clean) ? clean.filename().string() : clean.stem().string();
}

void check_id(const std::string& id, const std::string& from) {
    if (id.empty() || id.size() > 128) fail("{}: a model id must be 1-128 characters, got '{}'", from, id);
    for (char c : id)
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) > 0x7e || c == '/')
            fail("{}: the model id '{}' must be printable ASCII without spaces or '/'", from, id);
}

void add_source(std::vector<server::ModelSource>& out, const std::string& id, const std::string& path,
                const std::string& from) {
    check_id(id, from);
    if (!is_model_path(path)) fail("{}: the model '{}' is neither a GGUF file nor a Hugging Face model folder", from, path);
    for (const auto& s : out)
        if (s.id == id) fail("{}: two models have the id '{}' (name one with ID=PATH)", from, id);
    out.push_back({id, path, {}});
}

// "ID=PATH" -> (ID, PATH) when the text is not itself a path and ID holds no '/'.
std::optional<std::pair<std::string, std::string>> split_alias(const std::string& text) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || is_model_path(text)) return std::nullopt;
    const std::string id = text.substr(0, eq);
    if (id.find('/') != std::string::npos) return std::nullopt;
    return std::pair{id, text.substr(eq + 1)};
}

void add_models_dir(std::vector<server::ModelSource>& out, const fs::path& dir) {
    const std::string from = "--models-dir " + dir.string();
    if (!fs::is_directory(dir)) fail("{}: not a folder", from);
    if (fs::exists(dir / "models.json")) {
        for (auto& entry : server::read_models_json(dir)) {
            add_source(out, entry.id, entry.path, from + " (models.json)");
            out.back().settings = std::move(entry.settings);
        }
        return;
    }
    std::vector<std::pair<std::string, std::string>> found;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const fs::path& p = entry.path();
        if (entry.is_regular_file() && p.extension() == ".gguf") found.push_back({p.stem().string(), p.string()});
        else if (entry.is_directory() && fs::exists(p / "config.json")) found.push_back({p.filename().string(), p.string()});
    }
    if (found.empty()) fail("{}: no *.gguf file or Hugging Face folder (with a config.json) in it, and no models.json", from);
    std::sort(found.begin(), found.end());
    for (const auto& [id, path] : found) add_source(out, id, path, from);
}

int64_t weight_bytes(const fs::path& path) {
    if (fs::is_regular_file(path)) return int64_t(fs::file_size(path));
    int64_t total = 0;
    for (const auto& entry : fs::directory_iterator(path))
        if (entry.is_regular_file() && (entry.path().extension() == ".safetensors" || entry.path().extension() == ".gguf"))
            total += int64_t(entry.file_size());
    return total;
}

}  // namespace

std::vector<server::ModelSource> collect_model_sources(const std::vector<std::string>& model_args,
                                                       const std::vector<std::string>& aliases,
                                                       const std::string& models_dir) {
    std::vector<server::ModelSource> out;
    for (const auto& arg : model_args) {
        if (auto pair = split_alias(arg)) add_source(out, pair->first, pair->second, "-m " + arg);
        else add_source(out, id_of_path(arg), arg, "-m " + arg);
    }
    for (const auto& alias : aliases) {
        auto pair = split_alias(alias);
        if (!pair) fail("--alias {}: with several models, give ID=PATH", alias);
        add_source(out, pair->first, pair->second, "--alias " + alias);
    }
    if (!models_dir.empty()) add_models_dir(out, models_dir);
    if (out.empty()) fail("no model: give -m PATH (repeatable) or --models-dir DIR");
    // A models.json alias is one more id of its model: unique among every id and alias.
    std::set<std::string> ids;
    for (const auto& s : out) ids.insert(s.id);
    for (const auto& s : out)
        for (const auto& alias : s.settings.aliases)
            if (!ids.insert(alias).second)
                fail("--models-dir {} (models.json): the alias '{}' of '{}' is already a model's id or alias", models_dir,
                     alias, s.id);
    return out;
}

int64_t estimate_model_memory(const std::string& path, const ServeModelOptions& options, int32_t max_seqs) {
    // The weights twice: the file's mapping and the backend's packed copy both stay resident (a
    // load's measured growth replaces this estimate once the model has loaded).
    const int64_t weights = 2 * weight_bytes(path);
    if (!options.kv.memory.empty()) return weights + int64_t(model::parse_memory_budget(options.kv.memory));
    if (!fs::is_regular_file(path)) return weights;  // a Hugging Face folder: its KV pool is not estimated
    // The KV pool as load_serve_model sizes it without --kv-memory.
    auto file = gguf::File::open(path);
    const model::ModelConfig cfg = model::read_config(*file);
    const int64_t context = options.max_context > 0 ? options.max_context : cfg.context_length;
    const int64_t tokens = std::max<int64_t>(context, int64_t(max_seqs) * 256);
    bool all_f32 = true;
    for (const auto& t : file->tensors()) all_f32 = all_f32 && t.type == gguf::GgmlType::F32;
    const kv::KvDtype dtype = options.kv.dtype.value_or(all_f32 ? kv::KvDtype::f32 : kv::KvDtype::f16);
    return weights + 2 * cfg.n_layers * cfg.kv_dim() * int64_t(kv::kv_dtype_size(dtype)) * tokens;
}

int64_t parse_models_memory(const std::string& text) {
    return int64_t(model::parse_memory_budget(text == "auto" ? "80%" : text, "--models-memory"));
}

}  // namespace pagoda::app
