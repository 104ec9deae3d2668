// The fusion pass: rewrites a step graph so that chains of ops the backend can run as one become
// one fused op (backend/op.h), only where the backend declares it. Patterns:
//   add(x, r) ; rms_norm(x) -> h                                   => add_rms_norm(x, r) -> x, h
//   matmul(W_qkv, h) -> q, k, v ; [add_bias q, k, v] ; rope q ; rope k ; kv_write(k, v)
//                                                                  => qkv_rope_kv_write(h) -> q
//   matmul(W_gate_up, h) -> g, u ; silu_mul(g, u) -> a             => matmul_silu_mul(h) -> a
// Then the backend's own rewrite (Backend::prepared_input_cols, e.g. the CPU's int8 activation rows):
//   [add_]rms_norm -> h read only by matmuls whose weights take the backend's prepared form of h
//                                        => [add_]rms_norm -> h, h.prepared ; matmul(h, h.prepared) ...
//      (the input is prepared once, in the norm's pass; the executor runs Backend::norm_prepare)
// In the LoRA twin graph (lora_graph.h) the lora_add nodes right after the QKV and gate|up matmuls
// join those chains where the backend fuses_lora() (Node::lora_parts): the fused
// op adds the update after its matmul, so a step with adapters keeps its fused ops.
// A chain is fused only when its intermediates are read nowhere else. The unfused graph stays
// runnable (--no-fusion, PAGODA_FUSION=0), and tests check that both give the same logits.
#pragma once
#include "backend/backend.h"
#include "model/graph.h"

namespace pagoda::model {

Graph fuse(const Graph& graph, const backend::Backend& backend);

// False when PAGODA_FUSION=0 (any other value but 1 throws pagoda::Error naming it).
bool fusion_enabled_by_env();

}  // namespace pagoda::model
