// Which models `pagoda serve` offers when it offers several, and what each costs in memory:
//   -m PATH (repeatable; the id is the file name without .gguf, or the folder's name), -m ID=PATH,
//   --alias ID=PATH, and --models-dir DIR: every *.gguf file and every Hugging Face folder (one with
//   a config.json) in DIR, named by file stem or folder name, or, when DIR has a models.json
//   ({"id": "path" or {"path", settings...}}, server/models_json.h), exactly the models it maps,
//   each with its settings (ModelSource::settings).
// The first model given is the default for requests that name none.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "apps/serve_loader.h"
#include "server/model_registry.h"

namespace pagoda::app {

// The models, in order: -m values, then --alias ones, then --models-dir's (sorted by id). Throws
// pagoda::Error for a path that is neither a GGUF file nor a folder, a duplicate id, a bad
// models.json or a folder with no models.
std::vector<server::ModelSource> collect_model_sources(const std::vector<std::string>& model_args,
                                                       const std::vector<std::string>& aliases,
                                                       const std::string& models_dir);

// Bytes the model at `path` takes once served with `options`: twice its weight files (the mapping
// and the backend's packed copy) plus its KV pool
// (--kv-memory when given, else what load_serve_model sizes it to: the context or 256 tokens per
// sequence, whichever is more). An estimate (weights converted at load, e.g. --quantize, differ).
int64_t estimate_model_memory(const std::string& path, const ServeModelOptions& options, int32_t max_seqs);

// --models-memory: a size (as --kv-memory's: "8GiB", "512MiB") or "auto" (80% of the memory
// available now). Throws pagoda::Error naming the flag.
int64_t parse_models_memory(const std::string& text);

}  // namespace pagoda::app
