#include "backend/op.h"

namespace pagoda::backend {

const char* op_name(OpKind op) {
    switch (op) {
        case OpKind::embed: return "embed";
        case OpKind::matmul: return "matmul";
        case OpKind::rms_norm: return "rms_norm";
        case OpKind::add: return "add";
        case OpKind::add_bias: return "add_bias";
        case OpKind::rope: return "rope";
        case OpKind::silu_mul: return "silu_mul";
        case OpKind::gelu_mul: return "gelu_mul";
        case OpKind::softmax: return "softmax";
        case OpKind::kv_write: return "kv_write";
        case OpKind::attention: return "attention";
        case OpKind::gather_logit_rows: return "gather_logit_rows";
        case OpKind::gather_hidden_rows: return "gather_hidden_rows";
        case OpKind::layer_norm: return "layer_norm";
        case OpKind::gelu: return "gelu";
        case OpKind::position_embedding: return "position_embedding";
        case OpKind::token_type_embedding: return "token_type_embedding";
        case OpKind::moe_ffn: return "moe_ffn";
        case OpKind::lora_add: return "lora_add";
        case OpKind::input_embeddings: return "input_embeddings";
        case OpKind::copy_columns: return "copy_columns";
        case OpKind::causal_conv1d: return "causal_conv1d";
        case OpKind::gated_delta_rule: return "gated_delta_rule";
        case OpKind::sigmoid_mul: return "sigmoid_mul";
        case OpKind::attn_temperature: return "attn_temperature";
        case OpKind::delta_gates: return "delta_gates";
        case OpKind::scale: return "scale";
        case OpKind::softcap: return "softcap";
        case OpKind::add_rms_norm: return "add_rms_norm";
        case OpKind::qkv_rope_kv_write: return "qkv_rope_kv_write";
        case OpKind::matmul_silu_mul: return "matmul_silu_mul";
    }
    return "?";
}

bool is_optional_op(OpKind op) {
    switch (op) {
        case OpKind::layer_norm:
        case OpKind::gelu:
        case OpKind::position_embedding:
        case OpKind::token_type_embedding:
        case OpKind::copy_columns:
        case OpKind::causal_conv1d:
        case OpKind::gated_delta_rule:
        case OpKind::sigmoid_mul:
        case OpKind::attn_temperature: return true;
        default: return false;
    }
}

bool is_fused_op(OpKind op) {
    switch (op) {
        case OpKind::add_rms_norm:
        case OpKind::qkv_rope_kv_write:
        case OpKind::matmul_silu_mul: return true;
        default: return false;
    }
}

}  // namespace pagoda::backend
