// Activation-aware weight scaling (the idea of AWQ) for calibrated quantisation. Input columns that
// carry large activations matter most; multiplying those weight columns by s > 1 before quantising
// (and dividing the activations by s, folded exactly into the operation that produces them) gives
// them finer effective quantisation steps. Per layer, three groups are scaled:
//   attn_q/k/v   columns by s, attn_norm.weight divided by s
//   ffn_gate/up  columns by s, ffn_norm.weight divided by s
//   ffn_down     columns by s, rows of ffn_up divided by s (it feeds ffn_down through SiLU·mul)
// s = m^alpha / normaliser, with m the RMS activation of each column measured on calibration text;
// alpha in 0..1 is searched per group to minimise the activation-weighted reconstruction error of
// the group's quantised weights (alpha = 0 is no scaling, so the search never does worse on it).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quant/calibrated_quantize.h"

namespace pagoda {
class ThreadPool;
}
namespace pagoda::gguf {
class File;
}

namespace pagoda::quant {

struct ScalingPlan {
    std::map<std::string, std::vector<float>> column_scale;   // weight tensor -> per input column
    std::map<std::string, std::vector<float>> row_scale;      // weight tensor -> per output row (divides)
    std::map<std::string, std::vector<float>> new_vectors;    // 1-D tensor -> replacement f32 values
    std::map<std::string, float> alpha;                       // group (first tensor) -> chosen alpha
};

using TargetOf = std::function<std::optional<QuantTarget>(const std::string& tensor)>;
using RowReader = std::function<void(const std::string& tensor, int64_t row, float* out)>;

ScalingPlan plan_activation_scaling(const gguf::File& file, const std::map<std::string, std::vector<float>>& importance,
                                    const TargetOf& target_of, const RowReader& read_row, ThreadPool& pool);

}  // namespace pagoda::quant
