#include "model/arch/model_head.h"

namespace pagoda::model {

ModelHead bind_model_head(TensorBinder& bind, const ModelConfig& c) {
    const bool tied = !bind.has("output.weight");
    const auto& embd = bind.matrix({{"token_embd.weight", c.dim, c.vocab_size}},
                                   tied ? backend::WeightUse::both : backend::WeightUse::embedding);
    const auto& output_norm = bind.vector("output_norm.weight", c.dim);
    const auto& output = tied ? embd : bind.matrix({{"output.weight", c.dim, c.vocab_size}});
    return {embd, output_norm, output};
}

void emit_model_head(GraphEmitter& e, BuiltModel& m, const ModelHead& head, int x, float rms_eps, float final_softcap) {
    const int rows = e.gather_logit_rows(x, "x_out");
    const int normed = e.rms_norm(rows, head.output_norm, rms_eps, "out_in");
    m.graph.output = e.matmul(head.output, normed, {"logits"}, -1, MatmulInput::output)[0];
    if (final_softcap > 0) e.softcap(m.graph.output, final_softcap);
    const int hidden_rows = e.gather_hidden_rows(x, "x_hidden");
    m.graph.hidden = e.rms_norm(hidden_rows, head.output_norm, rms_eps, "hidden");
}

}  // namespace pagoda::model
