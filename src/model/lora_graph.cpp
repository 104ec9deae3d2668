#include "model/lora_graph.h"

#include "core/error.h"

namespace pagoda::model {

Graph with_lora_nodes(const Graph& g) {
    Graph out;
    out.tensors = g.tensors;
    out.output = g.output;
    out.hidden = g.hidden;
    for (const Node& n : g.nodes) {
        out.nodes.push_back(n);
        if (n.kind != OpKind::matmul || n.layer < 0 || !n.weight || n.in.empty()) continue;
        for (size_t p = 0; p < n.out.size() && p < n.weight->parts().size(); ++p) {
            Node update;
            update.kind = OpKind::lora_add;
            update.in = {n.in[0], n.out[p]};
            update.out = {n.out[p]};
            update.layer = n.layer;
            update.lora_target = int32_t(out.lora_targets.size());
            out.lora_targets.push_back(n.weight->parts()[p].name);
            out.nodes.push_back(std::move(update));
        }
    }
    return out;
}

LoraStep::LoraStep(const std::vector<std::string>& targets) : by_target_(targets.size()) {
    for (size_t i = 0; i < targets.size(); ++i) slots_.emplace(targets[i], int32_t(i));
}

int32_t LoraStep::slot(const std::string& target) const {
    auto it = slots_.find(target);
    return it == slots_.end() ? -1 : it->second;
}

bool LoraStep::prepare(const Batch& batch) {
    for (auto& v : by_target_) v.clear();
    if (batch.seq_lora.empty()) return false;
    if (batch.seq_lora.size() > batch.block_tables.size())
        fail("malformed batch: {} LoRA entries for {} sequences", batch.seq_lora.size(), batch.block_tables.size());
    // Groups: sequences sharing an adapter and a scale share one segment per target.
    struct Group {
        const lora::Adapter* adapter;
        float scale;
    };
    std::vector<Group> groups;
    std::vector<int32_t> group_of(batch.block_tables.size(), -1);
    for (size_t s = 0; s < batch.seq_lora.size(); ++s) {
        const lora::AdapterRef& ref = batch.seq_lora[s];
        if (!ref) continue;
        int32_t g = -1;
        for (size_t i = 0; i < groups.size(); ++i)
            if (groups[i].adapter == ref.adapter.get() && groups[i].scale == ref.scale) g = int32_t(i);
        if (g < 0) {
            for (const auto& p : ref.adapter->pairs)
                if (p.slot < 0 || size_t(p.slot) >= by_target_.size())
                    fail("LoRA adapter '{}' was not loaded for this model", ref.adapter->name);
            g = int32_t(groups.size());
            groups.push_back({ref.adapter.get(), ref.scale});
        }
        group_of[s] = g;
    }
    if (groups.empty()) return false;
    if (rows_.size() < groups.size()) rows_.resize(groups.size());
    for (size_t i = 0; i < groups.size(); ++i) rows_[i].clear();
    for (size_t t = 0; t < batch.seq_index.size(); ++t) {
        const int32_t g = group_of.at(size_t(batch.seq_index[t]));
        if (g >= 0) rows_[size_t(g)].push_back(int32_t(t));
    }
    for (size_t i = 0; i < groups.size(); ++i) {
        if (rows_[i].empty()) continue;
        for (const auto& p : groups[i].adapter->pairs)
            by_target_[size_t(p.slot)].push_back({.a = p.a.data(), .b = p.b.data(), .rank = p.rank,
                                                  .scale = groups[i].scale * p.factor, .rows = rows_[i]});
    }
    return true;
}

}  // namespace pagoda::model
