// {arch}.feed_forward_length as an array (one FFN width per block, as Gemma 4's E2B/E4B write it):
// read for any architecture, its largest width the model's ffn_dim, each layer's bound at its own
// width; a length other than the block count, a width out of range, or a width the stored tensors
// contradict is refused by name.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model_compare.h"

namespace pagoda::model {
namespace {

// The llama gen-model file (2 layers, FFN 160) with llama.feed_forward_length rewritten as `widths`.
std::string with_ffn_array(const std::vector<uint32_t>& widths, const std::string& name) {
    const std::string base = test::temp_path("layer_ffn_base.gguf");
    RandomModelSpec spec;
    spec.vocab_size = 300; spec.seed = 12;
    write_random_model(spec, nullptr, base);
    auto file = gguf::File::open(base);
    gguf::Writer w;
    for (const auto& [key, value] : file->metadata()) w.set(key, value);
    for (const auto& t : file->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    std::vector<gguf::Value> items;
    for (uint32_t v : widths) items.push_back(gguf::Value::u32(v));
    w.set("llama.feed_forward_length", gguf::Value::array(gguf::ValueType::u32, items));
    const std::string path = test::temp_path("layer_ffn_" + name + ".gguf");
    w.write(path);
    return path;
}

std::string load_error(const std::string& path) {
    try {
        open_step_model(path, {.backend = "reference", .tokens_wanted = 64});
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(LayerFfnWidths, AnArrayOfTheStoredWidthsRunsAsTheScalar) {
    const std::string path = with_ffn_array({160, 160}, "same");
    const ModelConfig c = read_config(*gguf::File::open(path));
    EXPECT_EQ(c.layer_ffn_dims, (std::vector<int64_t>{160, 160}));
    EXPECT_EQ(c.ffn_dim, 160);
    EXPECT_EQ(c.layer_ffn_dim(1), 160);
    const std::vector<int32_t> ids = model_compare::prompt(9);
    EXPECT_EQ(model_compare::reference_logits(path, ids),
              model_compare::reference_logits(test::temp_path("layer_ffn_base.gguf"), ids));
}

TEST(LayerFfnWidths, ScalarWidthIsEveryLayers) {
    ModelConfig c;
    c.ffn_dim = 96;
    EXPECT_TRUE(c.layer_ffn_dims.empty());
    EXPECT_EQ(c.layer_ffn_dim(7), 96);
}

TEST(LayerFfnWidths, BadArraysAreRefusedByName) {
    EXPECT_NE(load_error(with_ffn_array({160, 160, 160}, "long")).find("llama.feed_forward_length has 3 entries for 2 blocks"),
              std::string::npos);
    EXPECT_NE(load_error(with_ffn_array({160, 0}, "zero")).find("llama.feed_forward_length[1] = 0 is out of range"),
              std::string::npos);
    // 160 stored, 192 claimed for layer 0: the tensor is named with both shapes.
    const std::string shape = load_error(with_ffn_array({192, 160}, "shape"));
    EXPECT_NE(shape.find("tensor blk.0.ffn_gate.weight has shape"), std::string::npos) << shape;
}

}  // namespace
}  // namespace pagoda::model
