// The cut of a partial offload (layer_split.h) on real graphs, without a device: for every -ngl from
// 1 to n_layers, three segments (the host's input, the device's layers, the host's rest and head)
// whose ops are the graph's in order, each joined to the next by exactly one tensor: the embedded
// rows, then the residual stream (the ops between two layers that name none go to the side that
// leaves the fewest crossing), with the host's attention layers renumbered from -ngl, and the logits
// only in the last segment. The layer router keeps the token embedding off the device. Also the
// "blk.N." name parser.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/config.h"
#include "model/layer_router.h"
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
        ASSERT_EQ(segs.size(), 3u);
        EXPECT_EQ(segs[0].side, Side::host);
        EXPECT_EQ(segs[1].side, Side::device);
        EXPECT_EQ(segs[2].side, Side::host);
        EXPECT_EQ(segs[2].first_kv_layer, ngl);
        // The segments' ops are the graph's, in order; KV ops renumbered from their segment's first layer.
        std::vector<std::pair<const Node*, size_t>> ops;  // (op, its segment)
        for (size_t k = 0; k < segs.size(); ++k)
            for (const Node& node : segs[k].graph.nodes) ops.push_back({&node, k});
        ASSERT_EQ(ops.size(), g.nodes.size());
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            const Node& split = *ops[i].first;
            EXPECT_EQ(split.kind, g.nodes[i].kind) << "op " << i;
            EXPECT_EQ(split.in, g.nodes[i].in) << "op " << i;
            const bool kv = split.kind == OpKind::attention || split.kind == OpKind::kv_write;
            const int32_t offset = kv && ops[i].second == 2 ? ngl : 0;
            EXPECT_EQ(split.layer + offset, g.nodes[i].layer) << "op " << i;
        }
        // The input: the token embedding alone on the host, its rows the one tensor crossing to the device.
        for (const Node& node : segs[0].graph.nodes) EXPECT_NE(node.kind, OpKind::attention);
        EXPECT_EQ(segs[0].graph.nodes.front().kind, OpKind::embed) << "the embedding runs on the host";
        for (const Node& node : segs[1].graph.nodes) EXPECT_NE(node.kind, OpKind::embed) << "no embedding on the device";
        // One tensor crosses each cut: a token-rows tensor of the model's width (the embedded rows,
        // then the residual stream).
        for (size_t k = 0; k + 1 < segs.size(); ++k) {
            ASSERT_EQ(segs[k].graph.exported.size(), 1u) << "cut " << k;
            EXPECT_EQ(segs[k + 1].graph.imported, segs[k].graph.exported) << "cut " << k;
            const TensorSpec& crossing = g.tensors[size_t(segs[k].graph.exported[0])];
            EXPECT_EQ(crossing.rows, Rows::tokens);
            EXPECT_EQ(crossing.cols, spec.dim);
        }
        EXPECT_TRUE(segs[0].graph.imported.empty());
        EXPECT_TRUE(segs[2].graph.exported.empty());
        EXPECT_EQ(segs[0].graph.output, -1);
        EXPECT_EQ(segs[1].graph.output, -1);
        EXPECT_EQ(segs[2].graph.output, g.output);
        // Each side's attention: the device's layers 0..ngl-1, the host's the rest (renumbered).
        int32_t device_attention = 0, host_attention = 0;
        for (const Node& node : segs[1].graph.nodes) device_attention += node.kind == OpKind::attention;
        for (const Node& node : segs[2].graph.nodes) {
            if (node.kind != OpKind::attention) continue;
            EXPECT_EQ(node.layer, host_attention);
            ++host_attention;
        }
        EXPECT_EQ(device_attention, ngl);
        EXPECT_EQ(host_attention, n - ngl);
    }
}

INSTANTIATE_TEST_SUITE_P(Architectures, LayerSplitGraph, ::testing::Values("llama", "gemma3", "qwen3"),
                         [](const auto& info) { return info.param; });

// The layer router uploads the token embedding to the host only (llama.cpp keeps its input layer
// on the CPU: the table is large, a row gather cheap), a layer's weights to its side and the head to
// the host: the device holds no copy of the table, so pointing the embedding op at the device fails
// naming it. Any two backends show it (here reference as the "device", cpu as the host).
TEST(LayerRouter, KeepsTheTokenEmbeddingOnTheHost) {
    RandomModelSpec spec;
    spec.arch = "llama";
    spec.n_layers = 2; spec.dim = 32; spec.n_heads = 2; spec.n_kv_heads = 1; spec.ffn_dim = 48; spec.vocab_size = 300;
    const std::string path = test::temp_path("layer_router_embedding.gguf");
    write_random_model(spec, nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig config = read_config(*file);
    auto device = backend::make_backend("reference");
    auto host = backend::make_backend("cpu", {.n_threads = 1});
    LayerRouter router(*device, *host, {int32_t(spec.n_layers), 1});
    const BuiltModel built = find_arch_builder(config.arch)(*file, config, router);
    const std::vector<GraphSegment> segs = split_by_layer(built.graph, {int32_t(spec.n_layers), 1});
    ASSERT_EQ(segs.size(), 3u);
    Graph input = segs[0].graph;
    EXPECT_NO_THROW(router.rebind(input, Side::host));
    Graph on_device = segs[0].graph;
    try {
        router.rebind(on_device, Side::device);
        ADD_FAILURE() << "the device has a copy of the token embedding";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'token_embd.weight' is not on the device"), std::string::npos) << e.what();
    }
    Graph layers = segs[1].graph;
    EXPECT_NO_THROW(router.rebind(layers, Side::device)) << "layer 0's weights are on the device";
    Graph rest = segs[2].graph;
    EXPECT_NO_THROW(router.rebind(rest, Side::host));
    EXPECT_NE(router.describe().find("token embedding on cpu"), std::string::npos) << router.describe();
}

}  // namespace
}  // namespace pagoda::model
