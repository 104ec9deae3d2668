// The two ends every decoder builder shares: the token embedding, the final norm and the output
// head (tied to the embedding when the file has no output.weight), bound by their GGUF names; and
// the graph's last ops — the rows that want logits, normed and projected to the vocabulary (with
// an optional final soft cap, Gemma 2), and the rows that want their hidden state, normed.
#pragma once
#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

struct ModelHead {
    const backend::Weight& embedding;
    const backend::Vector& output_norm;
    const backend::Weight& output;
};

ModelHead bind_model_head(TensorBinder& bind, const ModelConfig& c);

// Sets m.graph.output (logits) and m.graph.hidden from the residual stream x.
void emit_model_head(GraphEmitter& e, BuiltModel& m, const ModelHead& head, int x, float rms_eps,
                     float final_softcap = 0.0f);

}  // namespace pagoda::model
