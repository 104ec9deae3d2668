// The one way every command opens a model: a directory is a Hugging Face folder (config.json +
// safetensors, hf/hf_folder.h) presented as a gguf::File; anything else is a GGUF file. With
// `quantize` set (a `pagoda quantize --type` name, any case), pagoda's PTQ is applied at load, in
// memory, exactly as `pagoda quantize` would write it. Throws pagoda::Error with a clear message.
#pragma once
#include <memory>
#include <string>

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

struct ModelFileOptions {
    std::string quantize;  // empty: as stored
    int threads = 0;       // quantisation threads; 0: the default count
    // The caller needs a tokenizer: a folder whose view has none is refused here, naming
    // tokenizer.json (a GGUF without one keeps the tokenizer's own error).
    bool tokenizer = false;
};

std::shared_ptr<const gguf::File> open_model_file(const std::string& path, const ModelFileOptions& options = {});

// The help text for -m/--model.
inline constexpr const char* kModelPathHelp = "GGUF model file, or a Hugging Face model folder (config.json + safetensors)";

}  // namespace pagoda::model
