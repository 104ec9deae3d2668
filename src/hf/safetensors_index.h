// The safetensors files of a Hugging Face folder as one tensor set: `model.safetensors`, or the
// shards `model.safetensors.index.json` lists in its `weight_map` (tensor name -> shard file). Every
// shard is opened (mapped) once; every tensor of the map must be in its shard, and every tensor of a
// shard in the map, exactly once. A missing shard or tensor, a shard name that leaves the folder, or
// a folder with neither file is a pagoda::Error naming it.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hf/safetensors.h"

namespace pagoda::hf {

class SafetensorsSet {
public:
    static std::unique_ptr<SafetensorsSet> open(const std::string& dir);

    const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
    // Every tensor of every shard, shard by shard in file order.
    const std::vector<const SafetensorsTensor*>& tensors() const { return tensors_; }
    const SafetensorsTensor* find(std::string_view name) const;
    const std::string& source() const { return source_; }  // the index or the single file, for errors

private:
    std::string source_;
    std::vector<std::unique_ptr<SafetensorsFile>> shards_;
    std::vector<const SafetensorsTensor*> tensors_;
    std::map<std::string, const SafetensorsTensor*, std::less<>> index_;
};

}  // namespace pagoda::hf
