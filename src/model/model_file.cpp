#include "model/model_file.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "hf/hf_folder.h"
#include "quant/quantize_model.h"
#include "tokenizer/hf_tokenizer.h"

namespace pagoda::model {
namespace {

// A folder's tokenizer.json (+ tokenizer_config.json: chat template, special tokens) joins its view
// as the tokenizer.ggml.* keys a GGUF would carry, so tokenizer, chat template and model identity
// read it as they read a GGUF's.
std::shared_ptr<const gguf::File> with_hf_tokenizer(std::shared_ptr<const gguf::File> view, const std::string& dir) {
    const tokenizer::HfTokenizer tok = tokenizer::read_hf_tokenizer(dir);
    std::vector<std::pair<std::string, gguf::Value>> metadata = view->metadata();
    for (auto& [key, value] : tokenizer::vocab_spec_gguf_keys(tok.spec, tok.chat_template)) {
        auto it = std::find_if(metadata.begin(), metadata.end(), [&](const auto& kv) { return kv.first == key; });
        if (it != metadata.end()) it->second = std::move(value);
        else metadata.emplace_back(key, std::move(value));
    }
    std::vector<gguf::TensorInfo> tensors = view->tensors();
    const bool mapped = view->is_mapped();
    const std::string name = view->name();
    return gguf::File::assemble(name, std::move(metadata), std::move(tensors), view, mapped);
}

}  // namespace

std::shared_ptr<const gguf::File> open_model_file(const std::string& path, const ModelFileOptions& options) {
    std::error_code ec;
    const bool folder = std::filesystem::is_directory(path, ec);
    std::shared_ptr<const gguf::File> file =
        folder ? hf::open_hf_folder(path) : std::shared_ptr<const gguf::File>(gguf::File::open(path));
    if (folder && std::filesystem::exists(std::filesystem::path(path) / "tokenizer.json"))
        file = with_hf_tokenizer(std::move(file), path);
    if (folder && options.tokenizer && !file->has("tokenizer.ggml.model"))
        fail("{}: this command needs a tokenizer, and {}", path, file->missing_key_note("tokenizer.ggml.model"));
    if (options.quantize.empty()) return file;
    ThreadPool pool(options.threads > 0 ? options.threads : default_thread_count());
    return quant::quantize_loaded(std::move(file), options.quantize, pool);
}

}  // namespace pagoda::model
