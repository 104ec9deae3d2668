#include "quant/activation_scaling.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "quant/dequantize.h"

namespace pagoda::quant {
namespace {

constexpr int kAlphaSteps = 10;          // alpha = 0, 0.1, ..., 1
constexpr int64_t kSearchRows = 128;     // rows per tensor sampled for the alpha search

struct Member {
    std::string name;
    QuantTarget target;
    int64_t rows = 0, cols = 0;
    std::vector<float> row_divisor;  // empty: none
};

// Activation-weighted squared error of quantising sampled rows of each member with column scale s.
double group_error(const std::vector<Member>& members, const std::vector<float>& imp, const std::vector<float>& s,
                   const RowReader& read_row, ThreadPool& pool) {
    const int64_t cols = int64_t(imp.size());
    std::vector<float> scaled_imp(imp.size());
    for (size_t c = 0; c < imp.size(); ++c) scaled_imp[c] = imp[c] / (s[c] * s[c]);
    double total = 0;
    for (const auto& m : members) {
        const int64_t stride = std::max<int64_t>(1, m.rows / kSearchRows);
        const int64_t samples = (m.rows + stride - 1) / stride;
        std::vector<double> part(static_cast<size_t>(pool.size()), 0.0);
        const uint64_t row_bytes = *gguf::row_size(m.target.storage_type(), cols);
        pool.parallel_for(samples, 1, [&](int64_t begin, int64_t end, int thread) {
            std::vector<float> row(static_cast<size_t>(cols)), back(static_cast<size_t>(cols));
            std::vector<uint8_t> q(static_cast<size_t>(row_bytes));
            for (int64_t i = begin; i < end; ++i) {
                const int64_t r = i * stride;
                read_row(m.name, r, row.data());
                const float rd = m.row_divisor.empty() ? 1.0f : m.row_divisor[size_t(r)];
                for (int64_t c = 0; c < cols; ++c) row[size_t(c)] = row[size_t(c)] / rd * s[size_t(c)];
                quantize_row_calibrated(m.target, row.data(), scaled_imp.data(), q.data(), cols);
                dequantize_row(m.target.storage_type(), q.data(), back.data(), cols);
                for (int64_t c = 0; c < cols; ++c) {
                    double d = double(row[size_t(c)]) - back[size_t(c)];
                    part[size_t(thread)] += double(scaled_imp[size_t(c)]) * d * d * rd * rd;
                }
            }
        });
        for (double p : part) total += p * double(stride);
    }
    return total;
}

std::vector<float> scales_for(const std::vector<float>& imp, float alpha) {
    std::vector<float> s(imp.size());
    float lo = 1e30f, hi = 0;
    for (size_t c = 0; c < imp.size(); ++c) {
        s[c] = std::pow(std::max(std::sqrt(imp[c]), 1e-8f), alpha);
        lo = std::min(lo, s[c]);
        hi = std::max(hi, s[c]);
    }
    // Centre the scales (geometric mean of the extremes = 1) so weights keep their magnitude overall.
    const float norm = std::sqrt(lo * hi);
    for (float& v : s) v = std::clamp(v / norm, 1e-4f, 1e4f);
    return s;
}

}  // namespace

ScalingPlan plan_activation_scaling(const gguf::File& file, const std::map<std::string, std::vector<float>>& importance,
                                    const TargetOf& target_of, const RowReader& read_row, ThreadPool& pool) {
    ScalingPlan plan;
    const std::string arch = file.get_string_or("general.architecture", "");
    const int64_t n_layers = arch.empty() ? 0 : file.get_int_or(arch + ".block_count", 0);

    auto member = [&](const std::string& name, std::vector<float> row_divisor = {}) -> std::optional<Member> {
        const auto* t = file.find_tensor(name);
        auto target = target_of(name);
        if (!t || !target || t->shape.size() != 2) return std::nullopt;
        return Member{name, *target, t->shape[1], t->shape[0], std::move(row_divisor)};
    };
    auto norm_vector = [&](const std::string& name, int64_t n) -> std::optional<std::vector<float>> {
        const auto* t = file.find_tensor(name);
        if (!t || t->shape != std::vector<int64_t>{n}) return std::nullopt;
        std::vector<float> v(static_cast<size_t>(n));
        if (t->type == gguf::GgmlType::F32) std::memcpy(v.data(), t->data, size_t(n) * 4);
        else return std::nullopt;
        return v;
    };
    // Chooses alpha for one group; returns the column scales (empty when alpha = 0 wins).
    auto search = [&](const std::vector<Member>& members, const std::vector<float>& imp) {
        double best = group_error(members, imp, std::vector<float>(imp.size(), 1.0f), read_row, pool);
        float best_alpha = 0;
        std::vector<float> best_s;
        for (int step = 1; step <= kAlphaSteps; ++step) {
            float alpha = float(step) / kAlphaSteps;
            auto s = scales_for(imp, alpha);
            double e = group_error(members, imp, s, read_row, pool);
            if (e < best) { best = e; best_alpha = alpha; best_s = std::move(s); }
        }
        plan.alpha[members[0].name] = best_alpha;
        return best_s;
    };

    for (int64_t l = 0; l < n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        // ffn_down first: its scales change ffn_up's rows, which the gate/up group then quantises.
        std::vector<float> up_row_divisor;
        if (auto it = importance.find(p + "ffn_down.weight"); it != importance.end()) {
            auto down = member(p + "ffn_down.weight");
            const auto* up = file.find_tensor(p + "ffn_up.weight");
            if (down && up && up->shape.size() == 2 && up->shape[1] == int64_t(it->second.size())) {
                auto s = search({*down}, it->second);
                if (!s.empty()) {
                    plan.column_scale[down->name] = s;
                    up_row_divisor = s;
                    plan.row_scale[p + "ffn_up.weight"] = s;
                }
            }
        }
        struct Group { std::vector<std::string> names; std::string norm; };
        for (const Group& g : {Group{{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, p + "attn_norm.weight"},
                               Group{{p + "ffn_gate.weight", p + "ffn_up.weight"}, p + "ffn_norm.weight"}}) {
            auto it = importance.find(g.names[0]);
            if (it == importance.end()) continue;
            auto norm = norm_vector(g.norm, int64_t(it->second.size()));
            if (!norm) continue;
            std::vector<Member> members;
            for (const auto& name : g.names) {
                auto m = member(name, name == p + "ffn_up.weight" ? up_row_divisor : std::vector<float>{});
                if (!m) { members.clear(); break; }
                members.push_back(std::move(*m));
            }
            if (members.empty()) continue;
            auto s = search(members, it->second);
            if (s.empty()) continue;
            for (const auto& m : members) plan.column_scale[m.name] = s;
            for (size_t c = 0; c < s.size(); ++c) (*norm)[c] /= s[c];
            plan.new_vectors[g.norm] = std::move(*norm);
        }
    }
    return plan;
}

}  // namespace pagoda::quant
