// The reference backend's recurrent ops (backend.h: CausalConv1d, GatedDeltaRule) in plain double,
// token by token as the contract states them: the oracle the other backends' recurrences are
// checked against. The caller checked the shapes (check_causal_conv1d / check_gated_delta_rule).
#pragma once
#include <span>

#include "backend/backend.h"

namespace pagoda::backend::reference {

// x, out: rows x channels; weight: channels x kernel taps; state: slots x (kernel - 1) x channels.
void causal_conv1d(const CausalConv1d& op, std::span<const double> weight, const double* x, int64_t rows,
                   int64_t channels, double* state, double* out);

// Row-major tensors as GatedDeltaRule lays them out; `rows` tokens.
void gated_delta_rule(const GatedDeltaRule& op, int64_t rows, const double* q, const double* k, const double* v,
                      const double* g, const double* beta, double* state, double* out);

}  // namespace pagoda::backend::reference
