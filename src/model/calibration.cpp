#include "model/calibration.h"

#include <algorithm>
#include <fmt/format.h>

#include "core/error.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

std::vector<std::string> tensors_fed_by(int64_t layer, MatmulInput input) {
    const std::string p = fmt::format("blk.{}.", layer);
    switch (input) {
        case MatmulInput::attention:  // separate Q, K, V or Phi-3's fused attn_qkv (absent names are unused)
            return {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight", p + "attn_qkv.weight"};
        case MatmulInput::attention_output: return {p + "attn_output.weight"};
        case MatmulInput::ffn: return {p + "ffn_gate.weight", p + "ffn_up.weight"};
        case MatmulInput::ffn_down: return {p + "ffn_down.weight"};
        case MatmulInput::output: return {"output.weight"};
        case MatmulInput::none: return {};
    }
    return {};
}

struct Accumulator {
    std::vector<double> sum_sq;
    int64_t rows = 0;
};

}  // namespace

ActivationImportance collect_activation_importance(StepModel& model, const std::vector<int32_t>& tokens, int32_t bos,
                                                   int64_t window, int64_t max_tokens) {
    if (tokens.empty()) fail("the calibration text encodes to no tokens");
    if (window < 2) fail("calibration windows need at least 2 tokens");
    std::map<std::pair<int64_t, int>, Accumulator> acc;
    model.set_activation_observer([&](int64_t layer, MatmulInput input, const float* x, int64_t n, int64_t cols) {
        Accumulator& a = acc[{layer, int(input)}];
        if (a.sum_sq.empty()) a.sum_sq.assign(size_t(cols), 0.0);
        for (int64_t t = 0; t < n; ++t)
            for (int64_t c = 0; c < cols; ++c) a.sum_sq[size_t(c)] += double(x[t * cols + c]) * x[t * cols + c];
        a.rows += n;
    });
    try {
        SequenceRunner runner(model, false);
        const int64_t body = bos >= 0 ? window - 1 : window;
        const int64_t total = std::min<int64_t>(int64_t(tokens.size()), max_tokens);
        kv::SeqId seq = 0;
        for (int64_t start = 0; start < total; start += body) {
            std::vector<int32_t> ids;
            if (bos >= 0) ids.push_back(bos);
            ids.insert(ids.end(), tokens.begin() + start, tokens.begin() + std::min(total, start + body));
            // All rows: the output head's statistics need every position's final hidden state.
            runner.prefill(seq, ids, 512, true);
            runner.release(seq++);
        }
    } catch (...) {
        model.set_activation_observer(nullptr);
        throw;
    }
    model.set_activation_observer(nullptr);

    ActivationImportance out;
    for (const auto& [key, a] : acc) {
        std::vector<float> mean(a.sum_sq.size());
        for (size_t c = 0; c < mean.size(); ++c) mean[c] = float(a.sum_sq[c] / double(std::max<int64_t>(1, a.rows)));
        for (const auto& name : tensors_fed_by(key.first, MatmulInput(key.second))) out[name] = mean;
    }
    return out;
}

}  // namespace pagoda::model
