// The real StepModel: a loaded model::Model and the paged KV pool it reads and writes. The pool is
// sized from KvOptions (a memory budget, or enough blocks for `tokens_wanted` tokens), and
// info().max_context is the model's trained context (GGUF metadata) unless `max_context` overrides it.
#pragma once
#include <memory>

#include "engine/step_model.h"
#include "kv/kv_pool.h"
#include "model/kv_options.h"
#include "model/model.h"

namespace pagoda::engine {

class ModelStep : public StepModel {
public:
    // tokens_wanted: pool size when kv.memory is empty. max_context: 0 = the model's.
    ModelStep(std::shared_ptr<model::Model> model, const model::KvOptions& kv, int64_t tokens_wanted,
              int64_t max_context = 0);

    const StepModelInfo& info() const override { return info_; }
    std::vector<float> forward(const model::Batch& batch) override;

    model::Model& model() { return *model_; }
    kv::KvPool& pool() { return *pool_; }

private:
    std::shared_ptr<model::Model> model_;
    std::unique_ptr<kv::KvPool> pool_;
    StepModelInfo info_;
};

}  // namespace pagoda::engine
