// Every op a step graph runs, in one enum: the model layer's graph nodes (model/graph.h) and the
// backend's declarations (Backend::supports) name the same values. Three kinds:
//   - core ops every backend runs (embed .. softcap, moe_ffn, lora_add, input_embeddings, delta_gates);
//   - optional ops only some architectures need (is_optional_op): a backend declares the ones it
//     has, and a model that needs one its backend lacks is refused at load, naming the op;
//   - fused ops (is_fused_op): one op for a sequence of core ops, computing what the sequence
//     computes; the fusion pass (model/fusion.h) forms only those its backend declares.
#pragma once

namespace pagoda::backend {

enum class OpKind {
    embed, matmul, rms_norm, add, add_bias, rope, silu_mul, gelu_mul, softmax, kv_write, attention, gather_logit_rows,
    gather_hidden_rows, scale, softcap,
    moe_ffn,  // in: x, router logits; out: the FFN output, the backend's workspace (MoeOp)
    lora_add,  // in: x, y (a matmul's input and one part's output); y += the step's LoRA updates (lora_graph.h)
    // in place on the embedded input: the step's rows that carry a given embedding (an image's soft
    // tokens, Batch::embedding_rows) take it in place of their token's; a graph without it takes none.
    // Written through Backend::write, so every backend runs it.
    input_embeddings,
    // in alpha, beta (T x value heads); out g = softplus(alpha + dt_bias) * a and sigmoid(beta), in
    // place (Node::gates): the DeltaNet's decay and write gates, computed on the host from read()
    // rows (a few values per token) because no backend has softplus.
    delta_gates,
    // optional: the encoders': LayerNorm with bias; erf GELU in place; x += the learned position
    // embedding's row of each token's position (in place, weight = the table); x += the token-type
    // embedding's row of each token's type (the step's token types, 0 when none)
    layer_norm, gelu, position_embedding, token_type_embedding,
    // optional, in: src (and dst when it already holds columns); out: dst; ColumnCopy (MLA's K)
    copy_columns,
    // optional, gated DeltaNet (recurrent) layers: in x, state (a Rows::state tensor, updated in
    // place); out y (Node::conv). in q, k, v, g, beta, state; out y (Node::delta).
    causal_conv1d, gated_delta_rule,
    // optional, in gate, up; out sigmoid(gate) * up (qwen35's attention output gate)
    sigmoid_mul,
    // optional, in place on queries: each row times its position's attention temperature
    // (backend::AttnTemperature: Llama 4's tuning, as Mistral-Large-3 and Ministral 3 use it)
    attn_temperature,
    // fused: x += r, out = rms_norm(x); QkvOp; out = silu(x Wg^T) * (x Wu^T) for a weight of parts gate, up
    add_rms_norm, qkv_rope_kv_write, matmul_silu_mul,
};

const char* op_name(OpKind op);
bool is_optional_op(OpKind op);
bool is_fused_op(OpKind op);

}  // namespace pagoda::backend
