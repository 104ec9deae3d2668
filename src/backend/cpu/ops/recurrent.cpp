#include "backend/cpu/ops/recurrent.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "backend/cpu/ops/recurrent_paths.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace pagoda::backend::cpu {

void causal_conv1d_f32(const CausalConv1d& op, const float* weight, const float* x, int64_t rows, int64_t channels,
                       float* state, float* out, int64_t channel_begin, int64_t channel_end) {
    switch (active_isa()) {
        case Isa::avx512:
            return detail::causal_conv1d_avx512(op, weight, x, rows, channels, state, out, channel_begin, channel_end);
        case Isa::avx2:
            return detail::causal_conv1d_avx2(op, weight, x, rows, channels, state, out, channel_begin, channel_end);
        case Isa::scalar:
            return detail::causal_conv1d_scalar(op, weight, x, rows, channels, state, out, channel_begin, channel_end);
    }
}

namespace {
// out = a / max(|a|, eps) * scale: ggml_l2_norm's form (eps a floor on the norm, not a term under
// the root), its squares summed in double as ggml does, in four interleaved partial sums (a chain of
// dependent double adds per value was a tenth of a chunked prefill's delta rule).
void l2_normalise(const float* a, int64_t n, float eps, float scale, float* out) {
    double part[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j) part[j] += double(a[i + j] * a[i + j]);
    for (; i < n; ++i) part[0] += double(a[i] * a[i]);
    const double sum_sq = (part[0] + part[1]) + (part[2] + part[3]);
    const float factor = scale / std::max(std::sqrt(float(sum_sq)), eps);
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * factor;
}
}  // namespace

namespace {

// One token of one head, the recurrence as op_params.h writes it: the unfused twin of the chunked
// form, and the form of decode rows (a slot with one token in the call).
void delta_token(const GatedDeltaRule& op, int64_t t, int64_t h, const float* q, const float* k, const float* v,
                 const float* g, const float* beta, float* state, float* out) {
    const int64_t d = op.head_dim, hk = op.n_k_heads, hv = op.n_v_heads;
    thread_local std::vector<float> qn, kn, delta, acc;  // grow once to the head size, then are reused
    const auto width = static_cast<size_t>(d);
    qn.resize(width), kn.resize(width), delta.resize(width), acc.resize(width);
    const int64_t kh = h % hk;
    l2_normalise(q + (t * hk + kh) * d, d, op.l2_eps, op.scale, qn.data());
    l2_normalise(k + (t * hk + kh) * d, d, op.l2_eps, 1.0f, kn.data());
    const float* vh = v + (t * hv + h) * d;
    float* s = state + (int64_t(op.state_rows[size_t(t)]) * hv + h) * d * d;
    const float decay = std::exp(g[t * hv + h]), b = beta[t * hv + h];
    // Row by row (i over keys) so the inner loops run over contiguous values j.
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t i = 0; i < d; ++i) {
        float* si = s + i * d;
        for (int64_t j = 0; j < d; ++j) {
            si[j] *= decay;
            acc[size_t(j)] += si[j] * kn[size_t(i)];
        }
    }
    for (int64_t j = 0; j < d; ++j) delta[size_t(j)] = b * (vh[j] - acc[size_t(j)]);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t i = 0; i < d; ++i) {
        float* si = s + i * d;
        for (int64_t j = 0; j < d; ++j) {
            si[j] += kn[size_t(i)] * delta[size_t(j)];
            acc[size_t(j)] += si[j] * qn[size_t(i)];
        }
    }
    std::copy(acc.begin(), acc.end(), out + (t * hv + h) * d);
}

void delta_chunk(const detail::DeltaChunk& c) {
    switch (active_isa()) {
        case Isa::avx512: return detail::delta_chunk_avx512(c);
        case Isa::avx2: return detail::delta_chunk_avx2(c);
        case Isa::scalar: return detail::delta_chunk_scalar(c);
    }
}

// Heads [h0, h1) over the tokens `ts` of one slot (in row order), kDeltaChunk at a time: each chunk's
// rows gathered contiguous, run, and its outputs scattered back. The value heads reading one key head
// share its normalised q and k (normalised as delta_token normalises them).
void delta_run(const GatedDeltaRule& op, std::span<const int64_t> ts, int64_t h0, int64_t h1, const float* q,
               const float* k, const float* v, const float* g, const float* beta, float* state, float* out) {
    const int64_t d = op.head_dim, hk = op.n_k_heads, hv = op.n_v_heads, chunk = detail::kDeltaChunk;
    thread_local std::vector<float> buf;  // grows once to the head size, then is reused
    buf.resize(size_t(4 * chunk * d + 2 * chunk));
    float *qc = buf.data(), *kc = qc + chunk * d, *vc = kc + chunk * d, *oc = vc + chunk * d;
    float *gc = oc + chunk * d, *bc = gc + chunk;
    float* slot = state + int64_t(op.state_rows[size_t(ts[0])]) * hv * d * d;
    for (int64_t kh = 0; kh < hk; ++kh) {
        // The first value head of [h0, h1) that reads key head kh; the others follow hk apart.
        const int64_t first = h0 + ((kh - h0) % hk + hk) % hk;
        if (first >= h1) continue;
        for (size_t at = 0; at < ts.size(); at += size_t(chunk)) {
            const int64_t n = std::min<int64_t>(chunk, int64_t(ts.size() - at));
            for (int64_t i = 0; i < n; ++i) {
                const int64_t t = ts[at + size_t(i)];
                l2_normalise(q + (t * hk + kh) * d, d, op.l2_eps, op.scale, qc + i * d);
                l2_normalise(k + (t * hk + kh) * d, d, op.l2_eps, 1.0f, kc + i * d);
            }
            for (int64_t h = first; h < h1; h += hk) {
                for (int64_t i = 0; i < n; ++i) {
                    const int64_t t = ts[at + size_t(i)];
                    std::copy_n(v + (t * hv + h) * d, d, vc + i * d);
                    gc[i] = g[t * hv + h];
                    bc[i] = beta[t * hv + h];
                }
                delta_chunk({.n = n, .d = d, .q = qc, .k = kc, .v = vc, .g = gc, .beta = bc, .state = slot + h * d * d,
                             .out = oc});
                for (int64_t i = 0; i < n; ++i) std::copy_n(oc + i * d, d, out + (ts[at + size_t(i)] * hv + h) * d);
            }
        }
    }
}

}  // namespace

namespace {
DeltaRuleForm form_from_environment() {
    const char* v = std::getenv("PAGODA_DELTA_RULE");
    if (!v || !*v || std::string_view(v) == "recurrent") return DeltaRuleForm::recurrent;
    if (std::string_view(v) == "chunked") return DeltaRuleForm::chunked;
    fail("PAGODA_DELTA_RULE={} is not 'recurrent' or 'chunked'", v);
}
std::atomic<int> g_delta_rule_form{-1};  // -1: not read yet
}  // namespace

DeltaRuleForm delta_rule_form() {
    int form = g_delta_rule_form.load(std::memory_order_relaxed);
    if (form < 0) {
        form = int(form_from_environment());
        g_delta_rule_form.store(form, std::memory_order_relaxed);
    }
    return DeltaRuleForm(form);
}
void set_delta_rule_form(DeltaRuleForm form) { g_delta_rule_form.store(int(form), std::memory_order_relaxed); }

void gated_delta_rule_f32(const GatedDeltaRule& op, int64_t rows, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* state, float* out, int64_t head_begin,
                          int64_t head_end) {
    // Each slot's tokens in row order: the slots' states are disjoint, so running one slot's tokens
    // together (wherever other slots' rows fall between them) is the row-order recurrence, and a
    // sequence's results depend only on its own tokens in the call.
    thread_local std::vector<int64_t> order;
    order.resize(size_t(rows));
    for (int64_t t = 0; t < rows; ++t) order[size_t(t)] = t;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return op.state_rows[size_t(a)] < op.state_rows[size_t(b)]; });
    for (size_t at = 0; at < order.size();) {
        size_t end = at + 1;
        while (end < order.size() && op.state_rows[size_t(order[end])] == op.state_rows[size_t(order[at])]) ++end;
        const std::span<const int64_t> ts(order.data() + at, end - at);
        if (ts.size() == 1 || delta_rule_form() == DeltaRuleForm::recurrent) {
            for (int64_t t : ts)
                for (int64_t h = head_begin; h < head_end; ++h) delta_token(op, t, h, q, k, v, g, beta, state, out);
        } else {
            delta_run(op, ts, head_begin, head_end, q, k, v, g, beta, state, out);
        }
        at = end;
    }
}

void sigmoid_mul_f32(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = up[i] / (1.0f + std::exp(-gate[i]));
}

}  // namespace pagoda::backend::cpu
