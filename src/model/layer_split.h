// Cuts a step graph into the segments of a partial offload (-ngl N, llama.cpp's --n-gpu-layers): the
// input (the token embedding: a large table read by a cheap row gather, so it stays in host memory as
// llama.cpp keeps its input layer on the CPU) runs on the host backend, layers 0..N-1 on the device
// backend, layers N.. and the output head on the host again; the embedded rows cross to the device
// once a step. Each op belongs to a layer by
// what it names (node.layer, a "blk.N." weight), the embedding ops to the input and the output
// matmul and row gathers to the head; the ops between two layers that name none (a residual add, a
// norm) go to the side of the cut that leaves the fewest tensors crossing it, normally the residual
// stream alone. Each segment is the whole tensor list with its own ops, the tensors it takes from the
// segment before (imported) and hands to the one after (exported), and its KV layers renumbered from
// its first layer (each backend's KV cache holds its own layers only).
#pragma once
#include <cstdint>
#include <vector>

#include "model/graph.h"

namespace pagoda::model {

enum class Side { device, host };

struct LayerSplit {
    int32_t n_layers = 0;
    int32_t device_layers = 0;  // 1..n_layers: layers 0..device_layers-1 on the device, the head on the host
    Side side_of_layer(int32_t layer) const { return layer < device_layers ? Side::device : Side::host; }
    // The input (token embedding, gemma4's per-layer embedding inputs): the host.
    static constexpr Side input_side = Side::host;
};

struct GraphSegment {
    Side side = Side::device;
    int32_t first_kv_layer = 0;  // this segment's attention layers are numbered from here
    Graph graph;                 // output / hidden only in the segment that holds them last
};

// The segments in execution order: the host's input one (absent when the graph embeds nothing), the
// device one, then the host one (absent when the device runs every op after the input). Throws
// pagoda::Error when the graph's ops are not in layer order (the device would run twice in one step).
std::vector<GraphSegment> split_by_layer(const Graph& graph, const LayerSplit& split);

// Throws, naming the op and its layer, when `backend` cannot run one of the segment's ops
// (graph_check.h's first_refusal): a partial offload is refused at load.
void check_segment(const GraphSegment& segment, const backend::Backend& backend, const LayerSplit& split);

// The "blk.N." layer of a GGUF tensor name, or -1.
int32_t layer_of_tensor_name(const std::string& name);

}  // namespace pagoda::model
