#include "apps/draft_model_loader.h"

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"
#include "tune/profile_use.h"

namespace pagoda::app {

std::shared_ptr<model::StepModel> open_draft_model(const std::string& path, const tokenizer::Tokenizer& target_vocab,
                                                   const model::StepModel& target,
                                                   const model::StepModelOptions& target_options,
                                                   const std::string& profile) {
    std::shared_ptr<const gguf::File> file = model::open_model_file(path, {.quantize = {}, .threads = 0, .tokenizer = true});
    const auto draft_vocab = tokenizer::Tokenizer::from_gguf(*file);
    if (draft_vocab->n_vocab() != target_vocab.n_vocab())
        fail("--draft-model {}: its vocabulary has {} tokens, the model's {}: a draft model must share the model's "
             "tokenizer",
             path, draft_vocab->n_vocab(), target_vocab.n_vocab());
    for (int32_t id = 0; id < target_vocab.n_vocab(); ++id)
        if (draft_vocab->vocab().text(id) != target_vocab.vocab().text(id))
            fail("--draft-model {}: token {} is '{}' there but '{}' in the model: a draft model must share the model's "
                 "tokenizer",
                 path, id, draft_vocab->vocab().text(id), target_vocab.vocab().text(id));
    model::StepModelOptions o = target_options;
    o.kv.memory.clear();
    o.kv.dtype.reset();
    o.tokens_wanted = int64_t(target.info().n_kv_blocks) * target.info().block_size;
    o.max_context = target.info().max_context;
    if (!profile.empty()) o.kernel_plan = tune::model_kernel_plan(profile, path, "--draft-profile");
    auto draft = model::open_step_model(file, o);
    log_info("speculative decoding: draft model {} ({})", path, model::read_config(*file).describe());
    return draft;
}

}  // namespace pagoda::app
