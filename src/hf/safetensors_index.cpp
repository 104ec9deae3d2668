#include "hf/safetensors_index.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace pagoda::hf {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const SafetensorsTensor* SafetensorsSet::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second;
}

std::unique_ptr<SafetensorsSet> SafetensorsSet::open(const std::string& dir) {
    auto set = std::make_unique<SafetensorsSet>();
    const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
    const fs::path single = fs::path(dir) / "model.safetensors";
    if (!fs::exists(index_path)) {
        if (!fs::exists(single))
            fail("{}: no model.safetensors or model.safetensors.index.json in the folder", dir);
        set->source_ = single.string();
        set->shards_.push_back(SafetensorsFile::open(single.string()));
        for (const auto& t : set->shards_[0]->tensors()) {
            set->tensors_.push_back(&t);
            set->index_.emplace(t.name, &t);
        }
        return set;
    }
    set->source_ = index_path.string();
    std::ifstream in(index_path, std::ios::binary);
    if (!in) fail("cannot read {}", index_path.string());
    std::stringstream text;
    text << in.rdbuf();
    Json index;
    try {
        index = Json::parse(text.str());
    } catch (const Json::exception& e) {
        fail("{}: not valid JSON ({})", index_path.string(), e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
        fail("{}: 'weight_map' is missing or not an object", index_path.string());
    std::map<std::string, std::string> weight_map;  // tensor -> shard
    std::map<std::string, size_t> shard_of_file;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
        if (!shard.is_string()) fail("{}: weight_map entry '{}' is not a file name", index_path.string(), tensor);
        const std::string file = shard.get<std::string>();
        // A shard must be a plain file name of this folder: an index cannot point the loader elsewhere.
        if (file.empty() || file.find('/') != std::string::npos || file.find('\\') != std::string::npos ||
            file == "." || file == "..")
            fail("{}: weight_map entry '{}' names shard '{}', which is not a file of the folder", index_path.string(),
                 tensor, file);
        weight_map[tensor] = file;
        if (!shard_of_file.count(file)) {
            const fs::path p = fs::path(dir) / file;
            if (!fs::exists(p)) fail("{}: shard {} (holding tensor '{}') is missing", index_path.string(), file, tensor);
            shard_of_file[file] = set->shards_.size();
            set->shards_.push_back(SafetensorsFile::open(p.string()));
        }
    }
    for (const auto& shard : set->shards_) {
        const std::string file = fs::path(shard->name()).filename().string();
        for (const auto& t : shard->tensors()) {
            auto it = weight_map.find(t.name);
            if (it == weight_map.end())
                fail("{}: tensor '{}' of shard {} is not in the weight_map", index_path.string(), t.name, file);
            if (it->second != file)
                fail("{}: tensor '{}' is in shard {}, but the weight_map puts it in {}", index_path.string(), t.name, file,
                     it->second);
            set->tensors_.push_back(&t);
            set->index_.emplace(t.name, &t);
        }
    }
    for (const auto& [tensor, file] : weight_map)
        if (!set->index_.count(tensor))
            fail("{}: tensor '{}' is missing from shard {}", index_path.string(), tensor, file);
    return set;
}

}  // namespace pagoda::hf
