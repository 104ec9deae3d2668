// LoRA in the step graph. with_lora_nodes() rewrites an architecture's graph so that every layer
// projection (a matmul of a layer, not the embedding or the output head) is followed, per weight
// part, by a lora_add node that adds the step's adapter updates for that weight to its rows. The
// fusion pass folds the updates after the QKV and gate|up matmuls into their fused ops where the
// backend fuses_lora() (fusion.h; elsewhere they stay unfused). GraphModel keeps
// the plain fused graph for steps without adapters and runs this one only when some row has one. LoraStep groups a step's rows by adapter into the per-target segments
// the executor hands to Backend::lora_add, each with its adapter's compact form (LoraSegment::a_elems
// / bt_elems: F16 or BF16 where every number is exactly one, else F32 or, by lora::LoraStorage, rounded
// to BF16 / F16; B transposed), built once per adapter and dropped with it.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "lora/adapter.h"
#include "model/batch.h"
#include "model/graph.h"

namespace pagoda::model {

Graph with_lora_nodes(const Graph& graph);

class LoraStep {
public:
    explicit LoraStep(const std::vector<std::string>& targets, lora::LoraStorage storage = lora::LoraStorage::exact);
    size_t n_targets() const { return by_target_.size(); }
    // The graph's slot for a base tensor name, or -1 when no lora_add node updates it.
    int32_t slot(const std::string& target) const;
    // Groups the batch's rows by (adapter, scale); false when no row has an adapter. Throws when an
    // adapter was bound to another model (a slot out of range) or the batch's seq_lora is malformed.
    bool prepare(const Batch& batch);
    const std::vector<std::vector<backend::LoraSegment>>& segments() const { return by_target_; }
    // Builds the adapter's compact form now (StepModel::load_lora), so its first step does not;
    // prepare() builds it for an adapter it has not seen. Safe beside a running prepare().
    void add_adapter(const std::shared_ptr<const lora::Adapter>& adapter);

private:
    struct CompactPair {
        gguf::GgmlType elem = gguf::GgmlType::F32;
        std::vector<uint8_t> a, bt;  // a empty for F32 (the pair's own f32 A is it)
    };
    struct Compact {
        std::weak_ptr<const lora::Adapter> owner;  // expired: the adapter is gone (its address may return)
        std::vector<CompactPair> pairs;            // parallel to the adapter's pairs
    };
    std::shared_ptr<const Compact> build_compact(const std::shared_ptr<const lora::Adapter>& adapter) const;
    std::shared_ptr<const Compact> compact_for(const std::shared_ptr<const lora::Adapter>& adapter);

    lora::LoraStorage storage_;
    std::mutex compact_mutex_;
    std::map<const lora::Adapter*, std::shared_ptr<const Compact>> compact_;
    std::map<std::string, int32_t> slots_;
    std::vector<std::vector<backend::LoraSegment>> by_target_;
    std::vector<std::vector<int32_t>> rows_;  // per group
    std::vector<std::shared_ptr<const Compact>> group_compact_;  // per group, held for the step
};

}  // namespace pagoda::model
