// model/graph_check.h: the check every graph passes before it runs on a backend. A node the backend
// cannot run is refused naming what it lacks, the op, its layer and the tensor it writes; the first
// such node in graph order is the one named, and attention layers of a split's segment are counted
// from the segment's first layer.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/error.h"
#include "model/graph.h"
#include "model/graph_check.h"

namespace pagoda::model {
namespace {

// x -> rms_norm -> h -> (fused) matmul_silu_mul of layer 2 -> a; attention of layer 1 on h.
Graph small_graph(OpKind second) {
    Graph g;
    const int x = g.add_tensor("inp", Rows::tokens, 8);
    const int h = g.add_tensor("blk.2.ffn_norm", Rows::tokens, 8);
    const int a = g.add_tensor("blk.2.ffn_act", Rows::tokens, 8);
    Node norm;
    norm.kind = OpKind::rms_norm;
    norm.in = {x};
    norm.out = {h};
    norm.layer = 2;
    g.nodes.push_back(norm);
    Node n;
    n.kind = second;
    n.in = {h};
    n.out = {a};
    n.layer = 2;
    g.nodes.push_back(n);
    return g;
}

TEST(GraphCheck, NamesTheFirstOpTheBackendLacksWithItsLayerAndTensor) {
    auto reference = backend::make_backend("reference");
    // The reference declares no fused op.
    const Graph fused = small_graph(OpKind::matmul_silu_mul);
    EXPECT_EQ(first_refusal(fused, *reference), "the matmul_silu_mul op (the matmul_silu_mul of layer 2, writing blk.2.ffn_act)");
    try {
        check_graph(fused, *reference);
        FAIL() << "check_graph let through an op the reference does not declare";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(),
                     "the reference backend cannot run the matmul_silu_mul op (the matmul_silu_mul of layer 2, writing "
                     "blk.2.ffn_act)");
    }
    // The CPU declares it; and the core ops pass everywhere.
    EXPECT_EQ(first_refusal(fused, *backend::make_backend("cpu", {.n_threads = 1})), "");
    EXPECT_EQ(first_refusal(small_graph(OpKind::silu_mul), *reference), "");
    EXPECT_NO_THROW(check_graph(small_graph(OpKind::silu_mul), *reference));
}

TEST(GraphCheck, AsksTheBackendAboutEachOpsParameters) {
    auto reference = backend::make_backend("reference");
    backend::MoeOp moe;
    moe.routing.expert_scale = {0.5f, 2.0f};
    EXPECT_EQ(reference->refusal({.op = OpKind::moe_ffn, .moe = &moe}), "") << "the reference runs per-expert scales";
    EXPECT_EQ(reference->refusal({.op = OpKind::add_rms_norm}), "the add_rms_norm op");
    const backend::AttentionParams window{.n_heads = 2, .scale = 0.5f, .sliding_window = 4};
    EXPECT_EQ(reference->refusal({.op = OpKind::attention, .attention = &window}), "");
}

}  // namespace
}  // namespace pagoda::model
