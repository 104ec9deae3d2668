#include "model/graph_check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pagoda::model {

std::string first_refusal(const Graph& g, const backend::Backend& b, int32_t first_kv_layer) {
    for (const Node& n : g.nodes) {
        const backend::OpUse use{.op = n.kind,
                                 .attention = n.kind == OpKind::attention ? &n.attention : nullptr,
                                 .moe = n.kind == OpKind::moe_ffn ? &n.moe : nullptr};
        const std::string why = b.refusal(use);
        if (why.empty()) continue;
        const bool kv_layer = n.kind == OpKind::attention || n.kind == OpKind::kv_write ||
                              n.kind == OpKind::qkv_rope_kv_write;
        const int32_t layer = n.layer + (kv_layer ? first_kv_layer : 0);
        std::string where = fmt::format("the {}", op_name(n.kind));
        if (n.layer >= 0) where += fmt::format(" of layer {}", layer);
        if (!n.out.empty()) where += fmt::format(", writing {}", g.tensors[size_t(n.out[0])].name);
        return fmt::format("{} ({})", why, where);
    }
    return "";
}

void check_graph(const Graph& g, const backend::Backend& b) {
    if (const std::string why = first_refusal(g, b); !why.empty()) fail("the {} backend cannot run {}", b.name(), why);
}

}  // namespace pagoda::model
