// One forward step as a small graph: ops over named tensors, in execution order. An architecture's
// builder (model/arch/) writes it once at load; the fusion pass (fusion.h) rewrites it into the
// fused ops the backend declares; the executor (executor.h) runs it for every step. Shapes are
// symbolic in the step: a tensor has `T` rows (one per token of the step), `L` rows (one per row
// that wants logits) or `H` rows (one per row whose final hidden state is wanted, for embeddings)
// and a fixed number of columns, so one graph serves every batch.
//
// In-place ops (add, add_bias, rope, gelu, and add_rms_norm's first output) name the same tensor as input
// and output. The graph's output tensor is the logits, L x vocab; its optional `hidden` tensor is
// the final hidden state after the output norm, H x dim. An encoder's graph has no logits. A matmul-type op with a second
// input reads it as its first input's prepared form, which an rms_norm (add_rms_norm) with one
// output more than usual writes (fusion.h: the backend's own rewrite, Backend::prepared_input_cols).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/step_model.h"

namespace pagoda::model {

// The graph's ops are the backend's (backend/op.h: core, optional and fused ops in one enum).
using backend::OpKind;
using backend::op_name;
// The ops that multiply their first input by a weight (plain or fused): the calibration observer
// watches their inputs, and a second input is that one's prepared form.
inline bool multiplies_input(OpKind k) {
    return k == OpKind::matmul || k == OpKind::qkv_rope_kv_write || k == OpKind::matmul_silu_mul;
}

// T, L or H; `state`: Graph::state_slots rows that persist across steps (a recurrent layer's
// per-sequence state, one row per state slot; the executor keeps them out of the step's arena space).
enum class Rows { tokens, logits, hidden, state };

// The row counts of one step.
struct StepRows {
    int64_t tokens = 0, logits = 0, hidden = 0;
    int64_t state = 0;  // Graph::state_slots
    int64_t of(Rows r) const {
        return r == Rows::tokens ? tokens : r == Rows::logits ? logits : r == Rows::hidden ? hidden : state;
    }
};

struct TensorSpec {
    std::string name;
    Rows rows = Rows::tokens;
    int64_t cols = 0;
};

struct Node {
    OpKind kind{};
    std::vector<int> in, out;  // tensor ids
    const backend::Weight* weight = nullptr;    // embed, matmul, fused matmuls
    const backend::Vector* vector = nullptr;    // rms_norm / add_rms_norm / layer_norm weight, add_bias bias
    const backend::Vector* bias = nullptr;      // layer_norm bias
    const backend::Rope* rope = nullptr;        // rope
    float eps = 0;                              // rms_norm
    float value = 0;                            // scale: the factor; softcap: the cap
    int32_t layer = -1;                         // kv_write, attention, qkv op; the matmul's layer
    int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;  // rope, attention, qkv op; rms_norm: per head
    backend::AttentionParams attention;
    backend::QkvOp qkv;                         // qkv_rope_kv_write (pointers into the weights)
    MatmulInput role = MatmulInput::none;       // matmul: which activations it reads
    backend::MoeOp moe;                         // moe_ffn (pointers into the weights)
    int32_t lora_target = -1;                   // lora_add: index into Graph::lora_targets
    // qkv_rope_kv_write / matmul_silu_mul: per weight part, the lora_add target fused into the op
    // (Graph::lora_targets index; -1: none), backend::PartLora
    std::array<int32_t, 3> lora_parts = {-1, -1, -1};
    backend::ColumnCopy columns;                // copy_columns
    backend::AttnTemperature temperature;       // attn_temperature
    backend::CausalConv1d conv;                 // causal_conv1d (state_rows from the step)
    backend::GatedDeltaRule delta;              // gated_delta_rule (state_rows from the step)
    // input_embeddings: the given rows hold `embedding_slices` slices of the input's width; slice 0
    // replaces the rows, slice k > 0 is added to them (qwen3vl's deep-stack, after layer k - 1).
    int32_t embedding_slice = 0, embedding_slices = 1;
    struct DeltaGates {
        std::vector<float> dt_bias, a;  // per value head: ssm_dt.bias and ssm_a (= -exp(A_log))
    } gates;                                    // delta_gates
};

struct Graph {
    std::vector<TensorSpec> tensors;
    std::vector<Node> nodes;
    int output = -1;  // the logits (-1: an encoder, which has no output head; no row may want logits)
    int hidden = -1;  // the final hidden state (optional)
    std::vector<std::string> lora_targets;  // lora_add nodes' weights, by GGUF tensor name (lora_graph.h)
    // A segment of a graph split across backends (layer_split.h): the tensors an earlier segment wrote
    // (copied in before this one runs) and those a later one reads (copied out after it). Empty for a
    // whole graph.
    std::vector<int> imported, exported;
    // Rows of every Rows::state tensor (the state slots, one per sequence that may run at once);
    // set by the model before the executor is made (0: the graph has no state tensors).
    int64_t state_slots = 0;

    int add_tensor(std::string name, Rows rows, int64_t cols) {
        tensors.push_back({std::move(name), rows, cols});
        return int(tensors.size() - 1);
    }
    // Number of nodes of each kind, e.g. "matmul 155, rms_norm 45, ...".
    std::string op_counts() const;
};

// The graph as text, one op a line with its tensors' shapes for a step of n_tokens tokens and
// n_logits logit rows (and as many hidden rows), and the backend kernel each matmul runs.
std::string format_graph(const Graph& g, const backend::Backend& backend, int64_t n_tokens, int64_t n_logits);

}  // namespace pagoda::model
