// gemma4's per-layer embeddings (PLE: the E2B / E4B models), as llama.cpp's gemma4 graph and
// Hugging Face's Gemma4TextModel compute them, with P = gemma4.embedding_length_per_layer_input and
// L layers. Before the layers, from the tokens t and x = token_embd[t] * sqrt(dim):
//   tok = per_layer_token_embd[t] * sqrt(P)                                  (P * L values a token)
//   prj = per_layer_model_proj x / sqrt(dim), each layer's P values RMS-normed by per_layer_proj_norm
//   in  = (prj + tok) / sqrt(2)                        (layer l's input: values l*P .. l*P + P - 1)
// and in layer l, after the FFN's residual add and before layer_output_scale:
//   x += rms_norm(blk.l.proj (gelu(blk.l.inp_gate x) * in_l), blk.l.post_norm)     (GELU: tanh form)
#pragma once
#include "model/arch/graph_emitter.h"
#include "model/arch/tensor_binder.h"
#include "model/config.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

struct PerLayerInputs {
    int inputs = -1;     // the graph tensor `in` (P * L values a token); -1: the model has no PLE
    int64_t width = 0;   // P
};

// The per-layer width P from gemma4.embedding_length_per_layer_input (0 or absent: no PLE), checked
// against the tensors' presence; then `in` emitted from the scaled embedding x. Throws naming the
// key or tensor when they disagree, and the backend when it lacks copy_columns.
PerLayerInputs emit_per_layer_inputs(GraphEmitter& e, TensorBinder& bind, const gguf::File& file, const ModelConfig& c,
                                     backend::Backend& b, int x);

// Layer l's PLE block on the residual x (in place); nothing when `in` has no PLE.
void emit_per_layer_block(GraphEmitter& e, TensorBinder& bind, const ModelConfig& c, const PerLayerInputs& in,
                          int32_t l, int x);

}  // namespace pagoda::model
