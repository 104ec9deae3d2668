#include "model/lora_graph.h"

#include <cmath>

#include "backend/lora_layout.h"
#include "core/error.h"
#include "core/half.h"

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

namespace {

// Whether every value survives the trip through a 16-bit type exactly.
template <class To, class From>
bool exact_in(const std::vector<float>& values, To to, From from) {
    for (float v : values)
        if (float_to_bits(from(to(v))) != float_to_bits(v)) return false;
    return true;
}

// Whether every value stays finite through a 16-bit type (f16 ends at 65504).
template <class To, class From>
bool fits(const std::vector<float>& values, To to, From from) {
    for (float v : values)
        if (!std::isfinite(from(to(v)))) return false;
    return true;
}

// B (out x rank) transposed into the CPU backend's tiles (backend::lora_bt_index), each value
// converted by `to`; the padding past `out` stays zero.
template <class Elem, class To>
std::vector<uint8_t> transposed(const lora::LoraPair& p, To to) {
    std::vector<uint8_t> bytes(size_t(backend::lora_bt_size(p.rank, p.out)) * sizeof(Elem), 0);
    auto* bt = reinterpret_cast<Elem*>(bytes.data());
    for (int64_t o = 0; o < p.out; ++o)
        for (int64_t j = 0; j < p.rank; ++j) bt[backend::lora_bt_index(p.rank, j, o)] = to(p.b[size_t(o * p.rank + j)]);
    return bytes;
}

template <class To>
std::vector<uint8_t> converted(const std::vector<float>& values, To to) {
    std::vector<uint8_t> bytes(values.size() * sizeof(uint16_t));
    auto* out = reinterpret_cast<uint16_t*>(bytes.data());
    for (size_t i = 0; i < values.size(); ++i) out[i] = to(values[i]);
    return bytes;
}

}  // namespace

std::shared_ptr<const LoraStep::Compact> LoraStep::build_compact(const std::shared_ptr<const lora::Adapter>& adapter) const {
    auto c = std::make_shared<Compact>();
    c->owner = adapter;
    auto f16 = [](float v) { return f32_to_f16(v); };
    auto bf16 = [](float v) { return f32_to_bf16(v); };
    for (const lora::LoraPair& p : adapter->pairs) {
        CompactPair cp;
        if (exact_in(p.a, f16, f16_to_f32) && exact_in(p.b, f16, f16_to_f32)) {
            cp.elem = gguf::GgmlType::F16;
            cp.a = converted(p.a, f16);
            cp.bt = transposed<uint16_t>(p, f16);
        } else if (exact_in(p.a, bf16, bf16_to_f32) && exact_in(p.b, bf16, bf16_to_f32)) {
            cp.elem = gguf::GgmlType::BF16;
            cp.a = converted(p.a, bf16);
            cp.bt = transposed<uint16_t>(p, bf16);
        } else if (storage_ == lora::LoraStorage::bf16) {  // rounded (--lora-dtype bf16)
            cp.elem = gguf::GgmlType::BF16;
            cp.a = converted(p.a, bf16);
            cp.bt = transposed<uint16_t>(p, bf16);
        } else if (storage_ == lora::LoraStorage::f16 && fits(p.a, f16, f16_to_f32) && fits(p.b, f16, f16_to_f32)) {
            // rounded (--lora-dtype f16); a pair with a number past f16's range stays f32
            cp.elem = gguf::GgmlType::F16;
            cp.a = converted(p.a, f16);
            cp.bt = transposed<uint16_t>(p, f16);
        } else {
            cp.bt = transposed<float>(p, [](float v) { return v; });
        }
        c->pairs.push_back(std::move(cp));
    }
    return c;
}

std::shared_ptr<const LoraStep::Compact> LoraStep::compact_for(const std::shared_ptr<const lora::Adapter>& adapter) {
    {
        std::lock_guard lock(compact_mutex_);
        auto it = compact_.find(adapter.get());
        if (it != compact_.end() && it->second->owner.lock() == adapter) return it->second;
    }
    auto built = build_compact(adapter);
    std::lock_guard lock(compact_mutex_);
    for (auto it = compact_.begin(); it != compact_.end();)  // forget adapters that are gone
        it = it->second->owner.expired() ? compact_.erase(it) : std::next(it);
    compact_[adapter.get()] = built;
    return built;
}

void LoraStep::add_adapter(const std::shared_ptr<const lora::Adapter>& adapter) { compact_for(adapter); }

LoraStep::LoraStep(const std::vector<std::string>& targets, lora::LoraStorage storage)
    : storage_(storage), by_target_(targets.size()) {
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
        std::shared_ptr<const lora::Adapter> owner;
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
            groups.push_back({ref.adapter.get(), ref.scale, ref.adapter});
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
    group_compact_.assign(groups.size(), nullptr);
    for (size_t i = 0; i < groups.size(); ++i) {
        if (rows_[i].empty()) continue;
        group_compact_[i] = compact_for(groups[i].owner);
        const Compact& compact = *group_compact_[i];
        for (size_t k = 0; k < groups[i].adapter->pairs.size(); ++k) {
            const lora::LoraPair& p = groups[i].adapter->pairs[k];
            const CompactPair& cp = compact.pairs[k];
            by_target_[size_t(p.slot)].push_back({.a = p.a.data(), .b = p.b.data(), .rank = p.rank,
                                                  .scale = groups[i].scale * p.factor, .rows = rows_[i],
                                                  .elem = cp.elem,
                                                  .a_elems = cp.a.empty() ? static_cast<const void*>(p.a.data()) : cp.a.data(),
                                                  .bt_elems = cp.bt.data()});
        }
    }
    return true;
}

}  // namespace pagoda::model
