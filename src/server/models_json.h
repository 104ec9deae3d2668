// DIR/models.json for `serve --models-dir DIR` (apps/serve_models.cpp reads it): an object mapping each model id to its path, or to
// an object with its path and its own serve settings:
//   {"chat": "chat.gguf",
//    "code": {"path": "code.gguf", "ctx_size": 8192, "chat_template": "chatml", "max_seqs": 4,
//             "kv_memory": "2GiB", "max_batched_tokens": 1024, "reasoning_format": "none",
//             "reasoning_budgets": "256,1024,4096", "aliases": ["coder"],
//             "lora": ["sql=sql-lora.gguf:0.8", {"name": "py", "path": "py-peft", "scale": 1}]}}
// The keys are the serve flags' names in snake_case; each overrides that flag for this model only.
// Relative paths (the model's, adapters', a chat template file's) are taken from DIR. Every error
// (bad JSON, an unknown key, a wrong type, a bad value) throws pagoda::Error naming the file, the
// model id and the key.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/model_settings.h"

namespace pagoda::server {

struct ModelsJsonEntry {
    std::string id;
    std::string path;  // DIR-relative paths made DIR/path
    ModelSettings settings;
};

// The entries of `map` (the parsed file, named `file` in errors), in the file's order; `dir`
// resolves relative paths. Does not check that model paths exist (the caller does, naming them).
std::vector<ModelsJsonEntry> parse_models_json(const nlohmann::ordered_json& map, const std::filesystem::path& dir,
                                               const std::string& file);

// Reads and parses DIR/models.json.
std::vector<ModelsJsonEntry> read_models_json(const std::filesystem::path& dir);

}  // namespace pagoda::server
