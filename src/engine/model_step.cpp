#include "engine/model_step.h"

#include <functional>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::engine {

ModelStep::ModelStep(std::shared_ptr<model::Model> model, const model::KvOptions& kv, int64_t tokens_wanted,
                     int64_t max_context)
    : model_(std::move(model)) {
    if (!model_) fail("model step: no model");
    if (max_context < 0) fail("--ctx must not be negative, got {}", max_context);
    const auto& config = model_->config();
    const kv::KvLayout layout = model_->kv_layout(kv.block_size, kv.dtype);
    pool_ = std::make_unique<kv::KvPool>(layout, model::kv_block_count(kv, layout, tokens_wanted));
    info_.vocab_size = config.vocab_size;
    info_.n_kv_blocks = pool_->n_blocks();
    info_.block_size = pool_->block_size();
    info_.max_context = max_context > 0 ? max_context : config.context_length;
    // Distinguishes these weights in prefix-cache hashes (name, shape and the file's size).
    info_.model_key = std::hash<std::string>{}(config.name + "|" + config.describe());
}

std::vector<float> ModelStep::forward(const model::Batch& batch) { return model_->forward(batch, *pool_); }

}  // namespace pagoda::engine
