// gemma4's per-layer embeddings: see gemma4_per_layer.h for the equations.
#include "model/arch/gemma4_per_layer.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::model {

PerLayerInputs emit_per_layer_inputs(GraphEmitter& e, TensorBinder& bind, const gguf::File& file, const ModelConfig& c,
                                     backend::Backend& b, int x) {
    const std::string key = "gemma4.embedding_length_per_layer_input";
    const int64_t width = file.get_int_or(key, 0);
    const bool table = bind.has("per_layer_token_embd.weight");
    if (width < 0 || width > (int64_t(1) << 16)) fail("{}: {} = {} is out of range", file.name(), key, width);
    if (width == 0) {
        if (table) fail("{}: tensor per_layer_token_embd.weight is present but {} is 0 or missing", file.name(), key);
        return {};
    }
    if (!table) fail("{}: {} = {} but tensor per_layer_token_embd.weight is missing", file.name(), key, width);
    if (!b.supports(backend::OpKind::copy_columns))
        fail("{}: the {} backend has no copy_columns op, which gemma4's per-layer embeddings need", file.name(), b.name());
    const int64_t all = width * c.n_layers;
    // The token's P * L values, from a table that may be quantised (the backend's embedding op reads it).
    const auto& tokens = bind.matrix({{"per_layer_token_embd.weight", all, c.vocab_size}}, backend::WeightUse::embedding);
    const int tok = e.embed(tokens, "per_layer_tok");
    e.scale(tok, std::sqrt(float(width)));
    const auto& model_proj = bind.matrix({{"per_layer_model_proj.weight", c.dim, all}});
    const int in = e.matmul(model_proj, x, {"per_layer_in"}, -1, MatmulInput::none)[0];
    e.scale(in, 1.0f / std::sqrt(float(c.dim)));
    // One norm per layer's P values: the L slices are the "heads" of the row.
    e.rms_norm_heads(in, bind.vector("per_layer_proj_norm.weight", width), c.rms_eps, int32_t(c.n_layers));
    e.add(in, tok);
    e.scale(in, 1.0f / std::sqrt(2.0f));
    return {in, width};
}

void emit_per_layer_block(GraphEmitter& e, TensorBinder& bind, const ModelConfig& c, const PerLayerInputs& in,
                          int32_t l, int x) {
    if (in.inputs < 0) return;
    const std::string p = fmt::format("blk.{}.", l);
    const int64_t P = in.width;
    const auto& gate = bind.matrix({{p + "inp_gate.weight", c.dim, P}});
    const auto& proj = bind.matrix({{p + "proj.weight", P, c.dim}});
    const int g = e.matmul(gate, x, {p + "ple_gate"}, l, MatmulInput::none)[0];
    const int mine = e.copy_columns(in.inputs, -1,
                                    {.n_heads = 1, .width = P, .src_stride = 0, .src_offset = int64_t(l) * P,
                                     .dst_stride = 0, .dst_offset = 0},
                                    P, p + "ple_in");
    const int act = e.gelu_mul(g, mine, p + "ple_act");
    const int y = e.matmul(proj, act, {p + "ple_out"}, l, MatmulInput::none)[0];
    e.add(x, e.rms_norm(y, bind.vector(p + "post_norm.weight", c.dim), c.rms_eps, p + "ple_post"));
}

}  // namespace pagoda::model
