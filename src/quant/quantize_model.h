// The post-training quantisation driver behind `pagoda quantize`: reads a GGUF model (or a Hugging
// Face folder's GGUF view), quantises its
// weight matrices to a target type, and writes a standard GGUF that other readers load.
// Rules (printed in the summary): 1-D tensors (norms, biases) and the token embedding keep their
// type (unless token_embedding_type says otherwise); the output head gets Q8_0 for 8-bit targets and Q6_K for all others (as llama.cpp does);
// the mixes q3_k_m, q4_k_m, q5_k_m give some layer tensors more bits (quant/mix_rules.h). A matrix
// 3-D expert tensors (ffn_*_exps, experts stacked) are quantised row by row like any matrix; the
// expert router (ffn_gate_inp) keeps its type, as llama-quantize does. A matrix
// whose row length does not fit the target's block falls back to the next type that fits
// (int4-g128 -> int4-g32 -> q8_0, q4_k / q3_k / q2_k -> q4_0, q5_k -> q5_1, q6_k -> q8_0, iq4_xs ->
// iq4_nl), else stays.
// With importance statistics (calibration), weights are also scaled activation-aware first
// (quant/activation_scaling.h), the norms absorbing the inverse scales.
#pragma once
#include <functional>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "quant/calibrated_quantize.h"

namespace pagoda {
class ThreadPool;
}
namespace pagoda::gguf {
class File;
class Writer;
}

namespace pagoda::quant {

struct TensorReport {
    std::string name, from_type, to_type;
    uint64_t bytes_in = 0, bytes_out = 0;
    double relative_error = 0;  // importance-weighted relative RMS reconstruction error
    std::string rule;           // why it got this type
};

struct QuantizeRequest {
    std::string input, output;
    std::string target;  // q8_0 q4_0 q5_0 q5_1 q2_k q3_k q3_k_m q4_k q4_k_m q5_k q5_k_m q6_k iq4_nl iq4_xs mxfp4 int8 int4-g32 int4-g128
    // Per tensor name: column importance (mean squared input activation); missing: uniform.
    std::map<std::string, std::vector<float>> importance;
    // Called after each tensor, in file order: tensors done, of total, and the one just done.
    std::function<void(size_t done, size_t total, const TensorReport& tensor)> progress;
    bool plain = false;  // no clipping search: plain min/max scales (ggml's reference quantisers), for comparison
                         // (the other targets' quantisers have no such search: target_has_clipping_search)
    // Overrides of the rules for two tensors (a type name as for `target`, empty: the rule), like
    // llama-quantize's flags of the same names: e.g. token_embedding_type "q4_0" gives the layout
    // llama-quantize writes for a Q4_0 file (embedding Q4_0, output head Q6_K).
    std::string token_embedding_type, output_tensor_type;
};

struct QuantizeReport {
    std::vector<TensorReport> tensors;
    std::map<std::string, float> scaling_alpha;  // activation-aware scaling: group -> alpha chosen
    uint64_t bytes_in = 0, bytes_out = 0;
};

// Throws pagoda::Error for an unknown target, unreadable input or unwritable output.
QuantizeReport quantize_model(const QuantizeRequest& request, ThreadPool& pool);
// The same rules from a File into a Writer (request.input / output unused): the one per-tensor
// path behind both the file output above and quantize_loaded below.
QuantizeReport quantize_into(const gguf::File& in, const QuantizeRequest& request, ThreadPool& pool, gguf::Writer& out);
// `--quantize TYPE` at load: `in` quantised in memory (no file written) exactly as `pagoda quantize
// --type TYPE` would write it (type names case-insensitive). Refuses an unknown type and a model
// that already has quantised tensors.
std::shared_ptr<const gguf::File> quantize_loaded(std::shared_ptr<const gguf::File> in, const std::string& type,
                                                  ThreadPool& pool);

// The valid --type names, for help texts and errors.
const std::vector<std::string>& quantize_target_names();
// Whether `plain` changes what the target (one of quantize_target_names()) writes: true for q8_0, q4_0
// and the int schemes, whose default quantiser searches clipped scales (has_clipping_search).
bool target_has_clipping_search(const std::string& target);

}  // namespace pagoda::quant
