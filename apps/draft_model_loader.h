// Opens `--draft-model FILE` beside a target for speculative decoding. The draft must share the
// target's vocabulary — the same number of tokens and the same text for every id — or it is
// refused naming the first difference (a draft of another tokenizer proposes nonsense ids). Its KV
// pool holds as many tokens as the target's (in its own, usually smaller, layout), so whatever
// the target can run the draft can draft for. With --draft-profile its CPU backend runs that
// profile's kernel plan, the target keeping its own.
#pragma once
#include <memory>
#include <string>

#include "model/open_step_model.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::app {

// `target_options` are the options the target was opened with (backend, threads, KV block size);
// the draft takes them but its own KV type and a pool sized by token count, not by --kv-memory.
// `profile` (--draft-profile; empty: none) gives the draft its own kernel plan
// (tune::model_kernel_plan), else it runs the target's.
std::shared_ptr<model::StepModel> open_draft_model(const std::string& path, const tokenizer::Tokenizer& target_vocab,
                                                   const model::StepModel& target,
                                                   const model::StepModelOptions& target_options,
                                                   const std::string& profile = "");

}  // namespace pagoda::app
