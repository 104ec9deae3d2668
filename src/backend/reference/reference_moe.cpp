#include "backend/reference/reference_moe.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "backend/reference/reference_math.h"
#include "core/error.h"

namespace pagoda::backend::reference {

namespace {

// Gemma 4's per-expert output scale, on the chosen experts' weights.
void scale_per_expert(const MoeRouting& r, int64_t n_experts, const std::vector<int64_t>& chosen, std::vector<double>& weights) {
    if (r.expert_scale.empty()) return;
    if (int64_t(r.expert_scale.size()) != n_experts) fail("reference moe_ffn: the per-expert scales do not fit");
    for (size_t j = 0; j < chosen.size(); ++j) weights[j] *= double(r.expert_scale[size_t(chosen[j])]);
}

}  // namespace

// The router of MoeOp in doubles, written from MoeRouting's formulas on their own: scores, the
// biased selection, the group mask, a stable sort for the top k (ties: the lower index), then the
// weights. The plain softmax router keeps its original arithmetic (exp relative to the best logit).
void route_experts(const MoeOp& op, const double* lt, int64_t n_experts, std::vector<int64_t>& chosen,
                   std::vector<double>& weights) {
    const MoeRouting& r = op.routing;
    auto best_k = [](const std::vector<double>& v, int64_t k) {
        std::vector<int64_t> order(v.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[size_t(a)] > v[size_t(b)]; });
        order.resize(size_t(k));
        return order;
    };
    if (r.scoring == MoeScoring::softmax && r.correction_bias.empty() && r.n_groups <= 1) {
        chosen = best_k(std::vector<double>(lt, lt + n_experts), op.n_used);
        double all = 0, picked = 0;
        for (int64_t e = 0; e < n_experts; ++e) all += std::exp(lt[e] - lt[chosen[0]]);
        for (int64_t e : chosen) picked += std::exp(lt[e] - lt[chosen[0]]);
        for (int64_t e : chosen) weights.push_back(std::exp(lt[e] - lt[chosen[0]]) / (op.normalize ? picked : all) * r.scale);
        scale_per_expert(r, n_experts, chosen, weights);
        return;
    }
    std::vector<double> s(lt, lt + n_experts);
    if (r.scoring == MoeScoring::softmax) softmax_row(s.data(), n_experts);
    if (r.scoring == MoeScoring::sigmoid)
        for (auto& v : s) v = 1 / (1 + std::exp(-v));
    std::vector<double> sel = s;
    if (!r.correction_bias.empty()) {
        if (int64_t(r.correction_bias.size()) != n_experts) fail("reference moe_ffn: the correction bias does not fit");
        for (int64_t e = 0; e < n_experts; ++e) sel[size_t(e)] += r.correction_bias[size_t(e)];
    }
    if (r.n_groups > 1) {
        if (n_experts % r.n_groups != 0 || r.n_groups_used < 1 || r.n_groups_used > r.n_groups)
            fail("reference moe_ffn: {} groups ({} used) for {} experts", r.n_groups, r.n_groups_used, n_experts);
        const int64_t per = n_experts / r.n_groups;
        std::vector<double> score(size_t(r.n_groups));
        for (int64_t g = 0; g < r.n_groups; ++g) {
            std::vector<double> members(sel.begin() + g * per, sel.begin() + (g + 1) * per);
            std::sort(members.begin(), members.end(), std::greater<>());
            score[size_t(g)] = members[0] + members[1];
        }
        const std::vector<int64_t> kept = best_k(score, r.n_groups_used);
        for (int64_t e = 0; e < n_experts; ++e)
            if (std::find(kept.begin(), kept.end(), e / per) == kept.end()) sel[size_t(e)] = -std::numeric_limits<double>::infinity();
    }
    chosen = best_k(sel, op.n_used);
    for (int64_t e : chosen) weights.push_back(s[size_t(e)]);
    if (r.scoring == MoeScoring::softmax_selected) softmax_row(weights.data(), int64_t(weights.size()));
    if (op.normalize) {
        double sum = 0;
        for (double w : weights) sum += w;
        for (auto& w : weights) w /= std::max(sum, 6.103515625e-5);
    }
    for (auto& w : weights) w *= r.scale;
    scale_per_expert(r, n_experts, chosen, weights);
}


void expert_ffn(const ReferenceWeight& gate_up, const ReferenceWeight& down, const double* x, double* y,
                MoeActivation activation, const std::vector<double>* gate_bias, const std::vector<double>* up_bias,
                const std::vector<double>* down_bias) {
    if (gate_up.parts().size() != 2) fail("reference moe_ffn: {} is not a gate|up weight", gate_up.name());
    const MatrixSource& g = gate_up.parts()[0];
    const MatrixSource& u = gate_up.parts()[1];
    const MatrixSource& dn = down.parts()[0];
    std::vector<double> row(size_t(std::max(g.cols, dn.cols))), h(size_t(g.rows));
    for (int64_t r = 0; r < g.rows; ++r) {
        double a = 0, b = 0;
        dequantize_row(g, r, row.data());
        for (int64_t c = 0; c < g.cols; ++c) a += row[size_t(c)] * x[c];
        dequantize_row(u, r, row.data());
        for (int64_t c = 0; c < u.cols; ++c) b += row[size_t(c)] * x[c];
        if (gate_bias) a += (*gate_bias)[size_t(r)];
        if (up_bias) b += (*up_bias)[size_t(r)];
        switch (activation) {
            case MoeActivation::swiglu: h[size_t(r)] = silu(a) * b; break;
            case MoeActivation::gelu: h[size_t(r)] = gelu_tanh(a) * b; break;
            case MoeActivation::swiglu_oai: {
                const double limit = kSwigluOaiLimit, alpha = kSwigluOaiAlpha;
                const double ga = std::min(a, limit), ub = std::clamp(b, -limit, limit);
                h[size_t(r)] = ga / (1 + std::exp(-alpha * ga)) * (ub + 1);
                break;
            }
        }
    }
    for (int64_t r = 0; r < dn.rows; ++r) {
        dequantize_row(dn, r, row.data());
        double acc = 0;
        for (int64_t c = 0; c < dn.cols; ++c) acc += row[size_t(c)] * h[size_t(c)];
        y[r] = acc + (down_bias ? (*down_bias)[size_t(r)] : 0.0);
    }
}

void moe_token(const MoeOp& op, const double* x, const double* logits, int64_t n_experts, int64_t d, double* y,
               std::vector<double>& scratch) {
    std::vector<int64_t> chosen;
    std::vector<double> weights;
    route_experts(op, logits, n_experts, chosen, weights);
    scratch.resize(size_t(d));
    std::fill_n(y, d, 0.0);
    for (size_t j = 0; j < chosen.size(); ++j) {
        const auto e = size_t(chosen[j]);
        auto bias = [&](const std::vector<const Vector*>& b) { return b.empty() ? nullptr : &ours(*b[e]).values; };
        expert_ffn(ours(*op.gate_up[e]), ours(*op.down[e]), x, scratch.data(), op.activation, bias(op.gate_bias),
                   bias(op.up_bias), bias(op.down_bias));
        for (int64_t c = 0; c < d; ++c) y[c] += weights[j] * scratch[size_t(c)];
    }
    if (op.shared_gate_up) {
        double s = 1;
        if (op.shared_gate) {
            const auto& g = ours(*op.shared_gate).values;
            double dot = 0;
            for (int64_t c = 0; c < d; ++c) dot += g[size_t(c)] * x[c];
            s = 1 / (1 + std::exp(-dot));
        }
        expert_ffn(ours(*op.shared_gate_up), ours(*op.shared_down), x, scratch.data());
        for (int64_t c = 0; c < d; ++c) y[c] += s * scratch[size_t(c)];
    }
}

}  // namespace pagoda::backend::reference
