// The check before a model runs on a backend: every node of its graph (op, parameters) is asked of
// the backend (Backend::refusal), and the first one it cannot run is refused at load naming what it
// lacks, the op, its layer and the tensor it writes, and the backend: not deep inside a step.
#pragma once
#include <string>

#include "backend/backend.h"
#include "model/graph.h"

namespace pagoda::model {

// The first node of `graph` that `backend` cannot run, as "moe_ffn's per-expert output scales (the
// moe_ffn of layer 0, writing blk.0.ffn_moe_out)"; empty when it runs them all. Attention and KV
// layers are numbered from first_kv_layer (a split graph's segment numbers them from 0).
std::string first_refusal(const Graph& graph, const backend::Backend& backend, int32_t first_kv_layer = 0);

// Throws pagoda::Error "the B backend cannot run ..." when first_refusal finds a node.
void check_graph(const Graph& graph, const backend::Backend& backend);

}  // namespace pagoda::model
