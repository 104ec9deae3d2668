// A Hugging Face model folder (config.json + model.safetensors or sharded safetensors with
// model.safetensors.index.json) presented as a gguf::File: metadata synthesised from config.json
// under llama.cpp's keys (hf_config.h), tensors under GGUF names (hf_tensor_names.h). Tensors that
// need no transform point into the safetensors mappings (zero copy); permuted, stacked, +1 or
// F32-converted ones live in buffers the File owns. Nothing downstream can tell it from a GGUF.
// tokenizer.ggml.* keys are absent here (model::open_model_file adds those of the folder's
// tokenizer.json); a missing tokenizer key's error names tokenizer.json.
#pragma once
#include <memory>
#include <string>

namespace pagoda::gguf {
class File;
}

namespace pagoda::hf {

// Throws pagoda::Error naming the folder and the file, key or tensor at fault.
std::shared_ptr<const gguf::File> open_hf_folder(const std::string& dir);

// Writes `model` (F32/F16/BF16 tensors of a supported architecture) as a folder: config.json and
// model.safetensors, or with shards > 1 model-0000K-of-0000N.safetensors + the index. The inverse
// transforms are applied, so open_hf_folder(dir) gives back the same tensors. Tokenizer files are
// not written here (the caller adds them). Creates `dir` if needed; weight files of an earlier
// write there (model.safetensors, its index, model-*-of-*.safetensors) are replaced.
// A `bert` model is written as `hf_class` (an encoder class of hf_encoder_config.h; "" picks one), with
// modules.json + 1_Pooling/config.json when it has a mean, cls or last pooling_type.
void write_hf_folder(const gguf::File& model, const std::string& dir, int shards = 1, const std::string& hf_class = "");

}  // namespace pagoda::hf
