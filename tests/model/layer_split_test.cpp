// The cut of a partial offload (layer_split.h) on real graphs, without a device: for every -ngl from
// 1 to n_layers, two segments (device, then host) whose ops are the graph's in order, joined by
// exactly one tensor, the residual stream (the ops between two layers that name none go to the side
// that leaves the fewest crossing), with the host's attention layers renumbered from -ngl, and the
// logits only in the last segment. Also the "blk.N." name parser.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/config.h"
#include "model/layer_split.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

TEST(LayerSplit, TensorNamesGiveTheirLayer) {
    EXPECT_EQ(layer_of_tensor_name("blk.0.attn_q.weight"), 0);
    EXPECT_EQ(layer_of_tensor_name("blk.31.ffn_down.weight"), 31);
    EXPECT_EQ(layer_of_tensor_name("output.weight"), -1);
    EXPECT_EQ(layer_of_tensor_name("token_embd.weight"), -1);
    EXPECT_EQ(layer_of_tensor_name("blk..weight"), -1);
    EXPECT_EQ(layer_of_tensor_name("blk.1x.weight"), -1);
    EXPECT_EQ(layer_of_tensor_name("blk.7"), -1);
}

class LayerSplitGraph : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerSplitGraph, CutsOnceAtTheResidualStream) {
    RandomModelSpec spec;
    spec.arch = GetParam();
    spec.n_layers = 4; spec.dim = 64; spec.n_heads = 4; spec.n_kv_heads = 2; spec.ffn_dim = 96; spec.vocab_size = 300;
    if (spec.arch == "gemma3") spec.swa_period = 2, spec.sliding_window = 6;
    const std::string path = test::temp_path("layer_split_" + spec.arch + ".gguf");
    write_random_model(spec, nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig config = read_config(*file);
    auto cpu = backend::make_backend("cpu", {.n_threads = 1});
    const BuiltModel built = find_arch_builder(config.arch)(*file, config, *cpu);
    const Graph& g = built.graph;
    const int32_t n = 4;
    EXPECT_THROW(split_by_layer(g, {n, 0}), Error);
    EXPECT_THROW(split_by_layer(g, {n, n + 1}), Error);
    for (int32_t ngl = 1; ngl <= n; ++ngl) {
        SCOPED_TRACE("-ngl " + std::to_string(ngl));
        const std::vector<GraphSegment> segs = split_by_layer(g, {n, ngl});
        ASSERT_EQ(segs.size(), 2u);
        EXPECT_EQ(segs[0].side, Side::device);
        EXPECT_EQ(segs[1].side, Side::host);
        EXPECT_EQ(segs[1].first_kv_layer, ngl);
        ASSERT_EQ(segs[0].graph.nodes.size() + segs[1].graph.nodes.size(), g.nodes.size());
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            const Node& split = i < segs[0].graph.nodes.size() ? segs[0].graph.nodes[i]
                                                                : segs[1].graph.nodes[i - segs[0].graph.nodes.size()];
            EXPECT_EQ(split.kind, g.nodes[i].kind) << "op " << i;
            EXPECT_EQ(split.in, g.nodes[i].in) << "op " << i;
            const bool kv = split.kind == OpKind::attention || split.kind == OpKind::kv_write;
            const int32_t offset = kv && i >= segs[0].graph.nodes.size() ? ngl : 0;
            EXPECT_EQ(split.layer + offset, g.nodes[i].layer) << "op " << i;
        }
        // One tensor crosses: a token-rows tensor of the model's width (the residual stream).
        ASSERT_EQ(segs[0].graph.exported.size(), 1u);
        EXPECT_EQ(segs[1].graph.imported, segs[0].graph.exported);
        const TensorSpec& crossing = g.tensors[size_t(segs[0].graph.exported[0])];
        EXPECT_EQ(crossing.rows, Rows::tokens);
        EXPECT_EQ(crossing.cols, spec.dim);
        EXPECT_TRUE(segs[0].graph.imported.empty());
        EXPECT_TRUE(segs[1].graph.exported.empty());
        EXPECT_EQ(segs[0].graph.output, -1);
        EXPECT_EQ(segs[1].graph.output, g.output);
        // Each side's attention: the device's layers 0..ngl-1, the host's the rest (renumbered).
        int32_t device_attention = 0, host_attention = 0;
        for (const Node& node : segs[0].graph.nodes) device_attention += node.kind == OpKind::attention;
        for (const Node& node : segs[1].graph.nodes) {
            if (node.kind != OpKind::attention) continue;
            EXPECT_EQ(node.layer, host_attention);
            ++host_attention;
        }
        EXPECT_EQ(device_attention, ngl);
        EXPECT_EQ(host_attention, n - ngl);
        EXPECT_EQ(segs[0].graph.nodes.front().kind, OpKind::embed) << "the embedding runs with layer 0";
    }
}

INSTANTIATE_TEST_SUITE_P(Architectures, LayerSplitGraph, ::testing::Values("llama", "gemma3", "qwen3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pagoda::model
