// The CPU backend's gated DeltaNet ops (backend.h: CausalConv1d, GatedDeltaRule) and the attention
// layers' sigmoid_mul on f32 rows. The conv runs token by token in row order: a prefill in chunks
// and one token at a time give bitwise the same outputs and states. The delta rule runs each slot's
// tokens of the call together: token by token by default, or (DeltaRuleForm::chunked below) runs of
// more than one token in the chunkwise-parallel form (delta_chunk.h) kDeltaChunk tokens at a time,
// which agrees with the recurrence to float rounding, not bitwise. A sequence's results depend only
// on its own tokens in the call and its state, never on the other sequences beside it (bitwise).
// The caller checked the shapes (check_causal_conv1d / check_gated_delta_rule).
#pragma once
#include "backend/backend.h"

namespace pagoda::backend::cpu {

// x, out: rows x channels; weight: channels x kernel taps; state: slots x (kernel - 1) x channels.
// Channels [channel_begin, channel_end) only: channels never read each other's inputs or state, so
// threads may split them freely.
void causal_conv1d_f32(const CausalConv1d& op, const float* weight, const float* x, int64_t rows, int64_t channels,
                       float* state, float* out, int64_t channel_begin, int64_t channel_end);

// How gated_delta_rule_f32 runs a slot with more than one token in the call: recurrent (the
// default: token by token, as a decode row, so a prompt's results are bitwise the same however the
// engine splits it into steps, which the determinism promise of docs/api.md rests on) or chunked
// (delta_chunk.h: 2-4x faster prefill, but a step boundary inside a prompt changes the rounding, so
// the same prompt chunked differently may give other tokens; the fingerprint then ends in _nd).
// PAGODA_DELTA_RULE=recurrent|chunked chooses at first use (anything else throws);
// set_delta_rule_form overrides it. Process-wide; safe to set between steps.
enum class DeltaRuleForm { chunked, recurrent };
DeltaRuleForm delta_rule_form();
void set_delta_rule_form(DeltaRuleForm form);

// Row-major f32 tensors as GatedDeltaRule lays them out; `rows` tokens, value heads [head_begin,
// head_end) only: heads never read each other's state, so threads may split them freely.
void gated_delta_rule_f32(const GatedDeltaRule& op, int64_t rows, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* state, float* out, int64_t head_begin,
                          int64_t head_end);

// out[i] = up[i] / (1 + exp(-gate[i])) (the attention output gate); out may alias gate or up.
void sigmoid_mul_f32(const float* gate, const float* up, int64_t n, float* out);

}  // namespace pagoda::backend::cpu
