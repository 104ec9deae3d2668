#include "model/layer_split.h"

#include <climits>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "model/graph_check.h"

namespace pagoda::model {
namespace {

constexpr int32_t kUntagged = INT32_MIN;

const backend::Weight* named_weight(const Node& n) {
    if (n.weight) return n.weight;
    if (!n.moe.gate_up.empty()) return n.moe.gate_up[0];
    return nullptr;
}

// The layer an op belongs to: -1 the input, n_layers the head, kUntagged when it names nothing.
int32_t tag_of(const Node& n, int32_t n_layers) {
    switch (n.kind) {
        case OpKind::embed: case OpKind::position_embedding: case OpKind::token_type_embedding: return -1;
        case OpKind::input_embeddings: return n.embedding_slice > 0 ? n.layer : -1;
        case OpKind::gather_logit_rows: case OpKind::gather_hidden_rows: return n_layers;
        default: break;
    }
    if (n.role == MatmulInput::output) return n_layers;
    if (n.layer >= 0) return n.layer;
    if (const backend::Weight* w = named_weight(n); w && !w->parts().empty()) {
        const std::string& name = w->parts()[0].name;
        const int32_t layer = layer_of_tensor_name(name);
        if (layer >= 0) return layer;
        // gemma4's per-layer embedding inputs: uploaded with the input (layer_router.h), run with it
        if (name.rfind("per_layer_", 0) == 0) return -1;
    }
    return kUntagged;
}

}  // namespace

int32_t layer_of_tensor_name(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    const size_t dot = name.find('.', 4);
    if (dot == std::string::npos || dot == 4 || dot > 12) return -1;
    int32_t layer = 0;
    for (size_t i = 4; i < dot; ++i) {
        if (name[i] < '0' || name[i] > '9') return -1;
        layer = layer * 10 + (name[i] - '0');
    }
    return layer;
}

std::vector<GraphSegment> split_by_layer(const Graph& g, const LayerSplit& split) {
    if (split.device_layers < 1 || split.device_layers > split.n_layers)
        fail("split_by_layer: {} device layers of {}", split.device_layers, split.n_layers);
    const int n = int(g.nodes.size());
    auto side_of_tag = [&](int32_t tag) {
        if (tag < 0) return LayerSplit::input_side;
        return tag >= split.n_layers ? Side::host : split.side_of_layer(tag);
    };
    // Per tensor: the first op that writes it and the last that reads or writes it (the graph's
    // outputs are read after the last op).
    std::vector<int> first_write(g.tensors.size(), INT_MAX), last_use(g.tensors.size(), -1);
    for (int i = 0; i < n; ++i) {
        for (int id : g.nodes[size_t(i)].out) first_write[size_t(id)] = std::min(first_write[size_t(id)], i);
        for (int id : g.nodes[size_t(i)].in) last_use[size_t(id)] = std::max(last_use[size_t(id)], i);
        for (int id : g.nodes[size_t(i)].out) last_use[size_t(id)] = std::max(last_use[size_t(id)], i);
    }
    if (g.output >= 0) last_use[size_t(g.output)] = n;
    if (g.hidden >= 0) last_use[size_t(g.hidden)] = n;
    auto crossing = [&](int cut) {  // tensors written before op `cut` and used at or after it
        std::vector<int> ids;
        for (size_t t = 0; t < g.tensors.size(); ++t)
            if (first_write[t] < cut && last_use[t] >= cut) ids.push_back(int(t));
        return ids;
    };

    // KV shared across layers (gemma4): a later layer's attention reads an earlier layer's cache. Each
    // backend's cache holds its own layers, so the reader must sit on the same side as the cache.
    int32_t latest = -1;
    for (int i = 0; i < n; ++i) {
        const Node& node = g.nodes[size_t(i)];
        const int32_t tag = tag_of(node, split.n_layers);
        if (tag == kUntagged) continue;
        if (node.kind == OpKind::attention && tag < latest && side_of_tag(tag) != side_of_tag(latest))
            fail("-ngl {}: layer {} attends over layer {}'s KV (KV shared across layers) from the other side of the "
                 "split; splitting a shared-KV model there is not supported (offload every layer or fewer)",
                 split.device_layers, latest, tag);
        latest = std::max(latest, tag);
    }
    std::vector<Side> side(size_t(n), Side::host);
    int prev = -1;  // the last tagged op
    for (int i = 0; i <= n; ++i) {
        const int32_t tag = i < n ? tag_of(g.nodes[size_t(i)], split.n_layers) : kUntagged;
        if (i < n && tag == kUntagged) continue;
        if (i == n) {  // trailing untagged ops go with the last tagged one
            for (int j = prev + 1; j < n; ++j) side[size_t(j)] = prev >= 0 ? side[size_t(prev)] : Side::host;
            break;
        }
        const Side s = side_of_tag(tag);
        side[size_t(i)] = s;
        int cut = prev + 1;  // the untagged ops before op i go to op i's side from `cut` on
        if (prev >= 0 && side[size_t(prev)] != s) {
            size_t best = SIZE_MAX;
            for (int c = prev + 1; c <= i; ++c)
                if (const size_t k = crossing(c).size(); k < best) best = k, cut = c;
        }
        for (int j = prev + 1; j < i; ++j) side[size_t(j)] = j < cut ? side[size_t(prev)] : s;
        prev = i;
    }
    // The host's input ops, then one run of device ops, then the host's.
    int device_begin = 0;
    while (device_begin < n && side[size_t(device_begin)] == Side::host) ++device_begin;
    int device_end = device_begin;
    while (device_end < n && side[size_t(device_end)] == Side::device) ++device_end;
    for (int i = device_end; i < n; ++i)
        if (side[size_t(i)] == Side::device)
            fail("cannot split the graph at layer {}: op {} ({}) would run on the device after host ops",
                 split.device_layers, i, op_name(g.nodes[size_t(i)].kind));

    std::vector<GraphSegment> out;
    const int bounds[] = {0, device_begin, device_end, n};
    for (int part = 0; part < 3; ++part) {
        const int begin = bounds[part], end = bounds[part + 1];
        if (begin == end) continue;
        GraphSegment seg;
        seg.side = part == 1 ? Side::device : Side::host;
        // The input segment holds no attention layer: any KV op there falls outside [0, 0).
        seg.first_kv_layer = part == 2 ? split.device_layers : 0;
        const int32_t kv_end = part == 0 ? 0 : part == 1 ? split.device_layers : split.n_layers;
        seg.graph.tensors = g.tensors;
        seg.graph.lora_targets = g.lora_targets;
        seg.graph.nodes.assign(g.nodes.begin() + begin, g.nodes.begin() + end);
        for (Node& node : seg.graph.nodes) {
            if (node.kind != OpKind::kv_write && node.kind != OpKind::attention) continue;
            if (node.layer < seg.first_kv_layer || node.layer >= kv_end)
                fail("cannot split the graph at layer {}: the {} of layer {} falls on the other side", split.device_layers,
                     op_name(node.kind), node.layer);
            node.layer -= seg.first_kv_layer;
        }
        if (end == n) {
            seg.graph.output = g.output;
            seg.graph.hidden = g.hidden;
        }
        if (begin > 0) seg.graph.imported = crossing(begin);
        if (end < n) seg.graph.exported = crossing(end);
        out.push_back(std::move(seg));
    }
    return out;
}

void check_segment(const GraphSegment& seg, const backend::Backend& b, const LayerSplit& split) {
    if (const std::string why = first_refusal(seg.graph, b, seg.first_kv_layer); !why.empty())
        fail("-ngl {}: the {} backend cannot run {}; offload fewer layers (or none)", split.device_layers, b.name(), why);
}

}  // namespace pagoda::model
