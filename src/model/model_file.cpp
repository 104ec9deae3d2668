#include "model/model_file.h"

#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "hf/hf_folder.h"
#include "quant/quantize_model.h"

namespace pagoda::model {

std::shared_ptr<const gguf::File> open_model_file(const std::string& path, const ModelFileOptions& options) {
    std::error_code ec;
    const bool folder = std::filesystem::is_directory(path, ec);
    std::shared_ptr<const gguf::File> file =
        folder ? hf::open_hf_folder(path) : std::shared_ptr<const gguf::File>(gguf::File::open(path));
    if (folder && options.tokenizer && !file->has("tokenizer.ggml.model"))
        fail("{}: this command needs a tokenizer, and {}", path, file->missing_key_note("tokenizer.ggml.model"));
    if (options.quantize.empty()) return file;
    ThreadPool pool(options.threads > 0 ? options.threads : default_thread_count());
    return quant::quantize_loaded(std::move(file), options.quantize, pool);
}

}  // namespace pagoda::model
