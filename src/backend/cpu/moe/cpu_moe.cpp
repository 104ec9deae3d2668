#include "backend/cpu/moe/cpu_moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_step_helpers.h"
#include "backend/cpu/cpu_weight.h"
#include "backend/cpu/ops/ops.h"
#include "backend/moe_routing.h"
#include "core/error.h"

namespace pagoda::backend::cpu {
namespace {

// gpt-oss's clamped SwiGLU (MoeActivation::swiglu_oai), one row.
void swiglu_oai(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], kSwigluOaiLimit);
        const float u = std::clamp(up[i], -kSwigluOaiLimit, kSwigluOaiLimit);
        out[i] = g / (1.0f + std::exp(-kSwigluOaiAlpha * g)) * (u + 1.0f);
    }
}

void add_row(float* y, const Vector* b, int64_t n) {
    if (!b) return;
    const float* v = cpu(*b);
    for (int64_t c = 0; c < n; ++c) y[c] += v[c];
}

// The per-expert pieces expert_ffn needs beside its weights: its biases (null: none) and activation.
struct ExpertExtras {
    const Vector* gate_bias = nullptr;
    const Vector* up_bias = nullptr;
    const Vector* down_bias = nullptr;
    MoeActivation activation = MoeActivation::swiglu;
};

// One expert's FFN over the rows of x: gate|up into gu (+ biases), the activation into act, down
// into y (+ bias).
void expert_ffn(const CpuWeight& gate_up, const CpuWeight& down, const Tensor& x, float* gu, float* act, float* y,
                ThreadPool& threads, const PlanSettings& plan, const ExpertExtras& ex = {}) {
    const int64_t m = x.rows, f = gate_up.parts()[0].rows, d = down.parts()[0].rows;
    multiply(gate_up.packed()[0], x, nullptr, gu, threads, plan);
    if (!gate_up.stacked()) multiply(gate_up.packed()[1], x, nullptr, gu + m * f, threads, plan);
    // Row i's gate and up: [i][2f] when stacked, else the two [m][f] blocks.
    const bool stacked = gate_up.stacked();
    per_token(threads, m, [&](int64_t i) {
        float* g = stacked ? gu + i * 2 * f : gu + i * f;
        float* u = stacked ? gu + i * 2 * f + f : gu + m * f + i * f;
        add_row(g, ex.gate_bias, f);
        add_row(u, ex.up_bias, f);
        switch (ex.activation) {
            case MoeActivation::swiglu: cpu::silu_mul(g, u, f, act + i * f); break;
            case MoeActivation::gelu: cpu::gelu_mul(g, u, f, act + i * f); break;
            case MoeActivation::swiglu_oai: swiglu_oai(g, u, f, act + i * f); break;
        }
    });
    multiply(down.packed()[0], {act, m, f}, nullptr, y, threads, plan);
    if (ex.down_bias) per_token(threads, m, [&](int64_t i) { add_row(y + i * d, ex.down_bias, d); });
}

}  // namespace

int64_t moe_workspace_cols(const MoeOp& op) {
    if (op.gate_up.empty()) return 1;
    const int64_t d = op.gate_up[0]->cols(), f = std::max(op.ffn(), op.shared_ffn()), k = op.n_used;
    return d + 3 * f + k * d + 2 * k + 2;
}

void moe_ffn(const MoeOp& op, const Tensor& x, const Tensor& logits, const Tensor& out, const Tensor& ws,
             ThreadPool& threads, const PlanSettings& plan) {
    const auto n_experts = int32_t(op.gate_up.size());
    if (n_experts == 0 || int32_t(op.down.size()) != n_experts) fail("cpu backend: moe_ffn needs gate|up and down per expert");
    const int64_t n = x.rows, d = x.cols, k = op.n_used, f = op.ffn();
    const int64_t fw = std::max(f, op.shared_ffn());
    check_cols(x, op.gate_up[0]->cols(), "moe_ffn", "an input");
    check_cols(logits, n_experts, "moe_ffn", "router logits");
    check_cols(out, d, "moe_ffn", "an output");
    check_cols(ws, moe_workspace_cols(op), "moe_ffn", "a workspace");
    check_routing(op.routing, n_experts, int32_t(k));
    for (const auto* b : {&op.gate_bias, &op.up_bias, &op.down_bias})
        if (!b->empty() && int32_t(b->size()) != n_experts) fail("cpu backend: moe_ffn has {} expert biases for {} experts", b->size(), n_experts);
    if (n == 0) return;
    float* rows = f32w(ws);
    float* gu = rows + n * d;
    float* act = gu + n * 2 * fw;
    float* ranked = act + n * fw;  // [t][j][d]
    float* weights = ranked + n * k * d;
    auto* ids = reinterpret_cast<int32_t*>(weights + n * k);
    auto* tokens = ids + n * k;
    auto* ranks = tokens + n;
    per_token(threads, n, [&](int64_t t) {
        route_token(f32(logits) + t * n_experts, n_experts, int32_t(k), op.normalize, op.routing, ids + t * k,
                    weights + t * k);
    });
    // One GEMM per expert over the tokens that chose it (decode: k GEMVs); unchosen experts'
    // weights are never read.
    for (int32_t e = 0; e < n_experts; ++e) {
        int64_t m = 0;
        for (int64_t t = 0; t < n; ++t)
            for (int64_t j = 0; j < k; ++j)
                if (ids[t * k + j] == e) {
                    tokens[m] = int32_t(t);
                    ranks[m++] = int32_t(j);
                }
        if (m == 0) continue;
        for (int64_t i = 0; i < m; ++i)
            std::memcpy(rows + i * d, f32(x) + int64_t(tokens[i]) * d, size_t(d) * sizeof(float));
        const auto bias = [&](const std::vector<const Vector*>& b) { return b.empty() ? nullptr : b[size_t(e)]; };
        expert_ffn(cpu(*op.gate_up[size_t(e)]), cpu(*op.down[size_t(e)]), {rows, m, d}, gu, act, rows, threads, plan,
                   {bias(op.gate_bias), bias(op.up_bias), bias(op.down_bias), op.activation});
        for (int64_t i = 0; i < m; ++i)
            std::memcpy(ranked + (int64_t(tokens[i]) * k + ranks[i]) * d, rows + i * d, size_t(d) * sizeof(float));
    }
    // Each token's sum in rank order, then its gated shared expert.
    if (op.shared_gate_up) expert_ffn(cpu(*op.shared_gate_up), cpu(*op.shared_down), x, gu, act, rows, threads, plan);
    per_token(threads, n, [&](int64_t t) {
        float* o = f32w(out) + t * d;
        const float* y = ranked + t * k * d;
        for (int64_t c = 0; c < d; ++c) o[c] = weights[t * k] * y[c];
        for (int64_t j = 1; j < k; ++j)
            for (int64_t c = 0; c < d; ++c) o[c] += weights[t * k + j] * y[j * d + c];
        if (!op.shared_gate_up) return;
        float s = 1.0f;
        if (op.shared_gate) {
            const float* g = cpu(*op.shared_gate);
            const float* xt = f32(x) + t * d;
            float dot = 0;
            for (int64_t c = 0; c < d; ++c) dot += g[c] * xt[c];
            s = 1.0f / (1.0f + std::exp(-dot));
        }
        const float* sh = rows + t * d;
        for (int64_t c = 0; c < d; ++c) o[c] += s * sh[c];
    });
}

}  // namespace pagoda::backend::cpu
