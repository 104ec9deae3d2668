// Activation statistics for calibrated quantisation: runs the model over calibration tokens and
// returns, for every weight matrix, the mean squared value of each of its input columns — how much
// each column of the weight matters to the layer's output. Keys are GGUF tensor names
// ("blk.3.attn_q.weight", "output.weight", ...).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/step_model.h"

namespace pagoda::model {

using ActivationImportance = std::map<std::string, std::vector<float>>;

// Windows of `window` tokens (each prefixed with `bos` when bos >= 0); at most max_tokens in total.
// The model's KV cache must hold window + 1 tokens.
ActivationImportance collect_activation_importance(StepModel& model, const std::vector<int32_t>& tokens, int32_t bos,
                                                   int64_t window, int64_t max_tokens);

}  // namespace pagoda::model
