// The CPU backend's mixture-of-experts FFN (backend.h: moe_ffn): each token's top experts from
// the router logits (moe_routing.h), one GEMM per expert over the tokens that chose it, the
// weighted sum in rank order, then the gated shared expert where the model has one.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/thread_pool.h"

namespace pagoda::backend::cpu {

// Workspace per token row (floats): gathered inputs [D] (then the experts' down outputs and the
// shared expert's), gate|up [2F], activations [F], each rank's expert output [k D], the route
// (k weights, k expert ids), this expert's tokens and their ranks [2]. F: the wider FFN.
int64_t moe_workspace_cols(const MoeOp& op);
// out = the MoE FFN of x's rows, routed by `logits` [n x experts]; ws: moe_workspace_cols wide.
// The expert matmuls run under the backend's plan.
void moe_ffn(const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out, const Tensor& ws,
             ThreadPool& threads, const PlanSettings& plan);

}  // namespace pagoda::backend::cpu
