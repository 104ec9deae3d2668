#include "model/graph.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace pagoda::model {

std::string Graph::op_counts() const {
    std::map<std::string, int> counts;
    for (const auto& n : nodes) ++counts[op_name(n.kind)];
    std::string out;
    for (const auto& [name, count] : counts) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, count);
    return out;
}

std::string format_graph(const Graph& g, const backend::Backend& backend, int64_t n_tokens, int64_t n_logits) {
    const StepRows rows{n_tokens, n_logits, n_logits, g.state_slots};
    auto shape = [&](int id) {
        const TensorSpec& t = g.tensors[size_t(id)];
        return fmt::format("{}[{}x{}]", t.name, rows.of(t.rows), t.cols);
    };
    auto list = [&](const std::vector<int>& ids) {
        std::string s;
        for (int id : ids) s += (s.empty() ? "" : ", ") + shape(id);
        return s;
    };
    std::string out;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const Node& n = g.nodes[i];
        std::string line = fmt::format("{:4} {:<18} {}", i, op_name(n.kind), list(n.in));
        if (!n.out.empty() && n.out != n.in) line += " -> " + list(n.out);
        if (n.weight) {
            std::string names;
            for (const auto& p : n.weight->parts()) names += (names.empty() ? "" : "|") + p.name;
            line += fmt::format("  W={}", names);
            if (n.kind != OpKind::embed && n.kind != OpKind::position_embedding &&
                n.kind != OpKind::token_type_embedding) {
                line += fmt::format("  [{}]", backend.describe_matmul(*n.weight, rows.of(g.tensors[size_t(n.in[0])].rows)));
            }
        }
        if (n.kind == OpKind::moe_ffn && !n.moe.gate_up.empty()) {
            const auto& gu = *n.moe.gate_up[0];
            // Each expert's GEMM has the rows of the tokens that chose it: about T k / E of them.
            const int64_t t = rows.of(g.tensors[size_t(n.in[0])].rows);
            const int64_t per_expert = std::max<int64_t>(1, t * n.moe.n_used / int64_t(n.moe.gate_up.size()));
            line += fmt::format("  {} experts, top {}{}{}{}{}  W={}|{}... [{} per expert]", n.moe.gate_up.size(),
                                n.moe.n_used,
                                n.moe.routing.scoring == backend::MoeScoring::softmax
                                    ? "" : fmt::format(" ({})", backend::moe_scoring_name(n.moe.routing.scoring)),
                                n.moe.normalize ? " renormalised" : "",
                                n.moe.activation == backend::MoeActivation::swiglu
                                    ? "" : fmt::format(", {}", backend::moe_activation_name(n.moe.activation)),
                                n.moe.shared_gate_up ? ", shared expert" : "", gu.parts()[0].name, gu.parts()[1].name,
                                backend.describe_matmul(gu, per_expert));
        }
        if (n.kind == OpKind::scale || n.kind == OpKind::softcap) line += fmt::format("  {}", n.value);
        if (n.kind == OpKind::attn_temperature)
            line += fmt::format("  beta {} length {}", n.temperature.beta, n.temperature.length);
        if (n.attention.sliding_window > 0) line += fmt::format("  window {}", n.attention.sliding_window);
        if (n.attention.softcap > 0) line += fmt::format("  softcap {}", n.attention.softcap);
        if (n.attention.sinks) line += "  sinks";
        if (n.attention.alibi_max_bias > 0) line += fmt::format("  alibi {}", n.attention.alibi_max_bias);
        if (n.kind == OpKind::rms_norm && n.n_heads > 0) line += fmt::format("  per head ({} heads)", n.n_heads);
        if (n.layer >= 0 && (n.kind == OpKind::kv_write || n.kind == OpKind::attention || n.kind == OpKind::qkv_rope_kv_write))
            line += fmt::format("  layer {}", n.layer);
        out += line + "\n";
    }
    return out;
}

}  // namespace pagoda::model
