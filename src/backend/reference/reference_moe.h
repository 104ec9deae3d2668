// The reference backend's mixture-of-experts pieces (backend::MoeOp's contract), in double: the
// router written from MoeRouting's formulas on their own (not sharing the CPU's routing code, so it
// stays an independent oracle), and one expert's FFN from rows dequantised on the spot.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/reference/reference_weights.h"

namespace pagoda::backend::reference {

// The experts one token uses (`chosen`, best first, the lower index on a tie) and their weights.
void route_experts(const MoeOp& op, const double* logits, int64_t n_experts, std::vector<int64_t>& chosen,
                   std::vector<double>& weights);

// y = act(x Wg^T + bg, x Wu^T + bu) Wd^T + bd for one row x (biases where given).
void expert_ffn(const ReferenceWeight& gate_up, const ReferenceWeight& down, const double* x, double* y,
                MoeActivation activation = MoeActivation::swiglu, const std::vector<double>* gate_bias = nullptr,
                const std::vector<double>* up_bias = nullptr, const std::vector<double>* down_bias = nullptr);

// One token's MoE FFN (MoeOp's contract): its own top-k from `logits`, the chosen experts' FFNs summed
// in rank order with their weights, plus the (sigmoid-gated) shared expert; d values of x into y.
void moe_token(const MoeOp& op, const double* x, const double* logits, int64_t n_experts, int64_t d, double* y,
               std::vector<double>& scratch);

}  // namespace pagoda::backend::reference
