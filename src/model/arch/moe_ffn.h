// The FFN of a layer for the llama-family builders: the dense SwiGLU one (emit_swiglu_ffn: blk.N's
// ffn_gate / ffn_up stacked into one weight, ffn_down) and the mixture of experts, which binds blk.N's router
// (ffn_gate_inp, [dim, n_experts]), the stacked experts (ffn_gate_exps / ffn_up_exps [dim, ffn, E],
// ffn_down_exps [ffn, dim, E]; each expert's slice becomes its own backend weight, quantised like
// any matrix) and, for qwen2moe, the shared expert (ffn_gate_shexp / ffn_up_shexp / ffn_down_shexp
// and its sigmoid gate ffn_gate_inp_shexp [dim]); emits the router matmul and the moe_ffn op.
// The router follows the config (ModelConfig's expert_gating, expert_weights_norm / _scale, expert
// groups); the optional tensors llama.cpp names load where the file has them: the router bias
// ffn_gate_inp.bias [n_experts] (added to the logits), DeepSeek V3's score correction
// exp_probs_b.bias [n_experts], and per-expert biases ffn_gate_exps.bias / ffn_up_exps.bias
// [ffn, E] and ffn_down_exps.bias [dim, E] (gpt-oss). Gate and up may also come fused, as newer
// converters can write them: ffn_gate_up_exps.weight [dim, 2 ffn, E] (each expert's gate rows, then
// its up rows) and ffn_gate_up_exps.bias [2 ffn, E]. Gemma 4's per-expert output scale
// ffn_down_exps.scale [E] multiplies each expert's down projection (MoeRouting::expert_scale).
// Older Mixtral files with one 2-D tensor per expert (blk.N.ffn_gate.E.weight) load too.
// A missing or misshapen tensor is an error naming it.
#pragma once
#include <cstdint>

#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

struct MoeFfnOptions {
    bool shared_expert = false;  // qwen2moe, deepseek2
    bool shared_gate = true;     // the shared expert's sigmoid gate (qwen2moe; deepseek2's is ungated)
    backend::MoeActivation activation = backend::MoeActivation::swiglu;
    int router_input = -1;       // the tensor the router matmul reads (gemma4's own norm); -1: h
};

// The router of a config (scoring, renormalisation, scale, groups; no correction bias).
backend::MoeRouting moe_routing(const ModelConfig& c);

// The dense FFN down(silu(gate h) * up h) of layer `layer` (c.ffn_dim wide); returns its output (T x dim).
int emit_swiglu_ffn(GraphEmitter& e, TensorBinder& bind, const ModelConfig& c, int32_t layer, int h);

// Returns the FFN output tensor (T x dim) of layer `layer` for the normed input h.
int emit_moe_ffn(GraphEmitter& e, TensorBinder& bind, const gguf::File& file, const ModelConfig& c,
                 backend::Backend& backend, BuiltModel& m, int64_t layer, int h, const MoeFfnOptions& options);

}  // namespace pagoda::model
