// The classification head of a rank model (model/classifier_head.h): read from what gen-model
// writes, its class values equal the head computed here in double straight from the file's F32
// tensors (dense + tanh + output; qwen3's softmax); a model that is not rank has none; and every
// head that cannot be applied is a load error naming the tensor or key.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/classifier_head.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

using gguf::GgmlType;
using gguf::Value;

RandomModelSpec small_spec(const std::string& arch, const std::string& head) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_layers = 1; s.dim = 32; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 48; s.vocab_size = 300;
    s.rank_head = head;
    return s;
}

std::unique_ptr<gguf::File> build(const RandomModelSpec& s, gguf::Writer& w) {
    build_random_model(s, nullptr, w);
    return w.view("test");
}

std::vector<double> matvec(const gguf::File& f, const std::string& name, const std::vector<double>& x) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, GgmlType::F32);
    const auto* w = reinterpret_cast<const float*>(t->data);
    const int64_t n_in = t->shape[0], n_out = t->shape.size() > 1 ? t->shape[1] : 1;
    EXPECT_EQ(n_in, int64_t(x.size()));
    std::vector<double> y(size_t(n_out), 0.0);
    for (int64_t o = 0; o < n_out; ++o)
        for (int64_t i = 0; i < n_in; ++i) y[size_t(o)] += double(w[o * n_in + i]) * x[size_t(i)];
    if (const gguf::TensorInfo* b = f.find_tensor(name.substr(0, name.size() - 7) + ".bias"))
        for (int64_t o = 0; o < n_out; ++o) y[size_t(o)] += double(reinterpret_cast<const float*>(b->data)[o]);
    return y;
}

std::vector<float> some_state(int64_t n) {
    std::vector<float> h;
    for (int64_t i = 0; i < n; ++i) h.push_back(float(std::sin(0.7 * double(i) + 0.3)) * 1.5f);
    return h;
}

TEST(ClassifierHead, DenseTanhOutputEqualsTheHeadComputedFromTheTensors) {
    gguf::Writer w;
    const auto f = build(small_spec("llama", "dense"), w);
    EXPECT_EQ(f->get_int("llama.pooling_type"), 4);
    const auto head = ClassifierHead::from_gguf(*f, "llama", 32);
    ASSERT_TRUE(head.has_value());
    EXPECT_EQ(head->n_classes(), 1);
    EXPECT_FALSE(head->softmax());
    EXPECT_EQ(head->labels(), std::vector<std::string>{"LABEL_0"});
    EXPECT_EQ(head->describe(), "cls.weight 32->32, tanh, cls.output.weight 32->1");

    const std::vector<float> h = some_state(32);
    std::vector<double> y = matvec(*f, "cls.weight", std::vector<double>(h.begin(), h.end()));
    for (double& v : y) v = std::tanh(v);
    const std::vector<double> z = matvec(*f, "cls.output.weight", y);
    ASSERT_EQ(z.size(), 1u);
    EXPECT_NEAR(head->score(h), z[0], 1e-12);
    EXPECT_NE(head->score(h), head->score(std::vector<float>(h.rbegin(), h.rend())));  // depends on the state
    EXPECT_THROW(head->classify(some_state(31)), Error);
}

TEST(ClassifierHead, Qwen3OutputHeadIsSoftmaxedOverYesNo) {
    gguf::Writer w;
    const auto f = build(small_spec("qwen3", "output"), w);
    const auto head = ClassifierHead::from_gguf(*f, "qwen3", 32);
    ASSERT_TRUE(head.has_value());
    EXPECT_FALSE(head->dense().has_value());
    EXPECT_EQ(head->labels(), (std::vector<std::string>{"yes", "no"}));
    EXPECT_TRUE(head->softmax());
    const std::vector<float> h = some_state(32);
    const std::vector<double> z = matvec(*f, "cls.output.weight", std::vector<double>(h.begin(), h.end()));
    ASSERT_EQ(z.size(), 2u);
    const double p_yes = 1.0 / (1.0 + std::exp(z[1] - z[0]));
    const std::vector<double> got = head->classify(h);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_NEAR(got[0], p_yes, 1e-12);
    EXPECT_NEAR(got[0] + got[1], 1.0, 1e-12);
    EXPECT_NEAR(head->score(h), p_yes, 1e-12);
}

TEST(ClassifierHead, F16WeightsAreRead) {
    RandomModelSpec s = small_spec("llama", "output");
    s.type = GgmlType::F16;
    gguf::Writer w;
    const auto f = build(s, w);
    EXPECT_EQ(f->find_tensor("cls.output.weight")->type, GgmlType::F16);
    const auto head = ClassifierHead::from_gguf(*f, "llama", 32);
    ASSERT_TRUE(head.has_value());
    EXPECT_TRUE(std::isfinite(head->score(some_state(32))));
}

TEST(ClassifierHead, ModelsThatAreNotRankHaveNone) {
    gguf::Writer w;
    const auto f = build(small_spec("llama", ""), w);
    EXPECT_FALSE(ClassifierHead::from_gguf(*f, "llama", 32).has_value());
    EXPECT_EQ(f->find_tensor("cls.output.weight"), nullptr);
}

// A file with only what the head reads: pooling_type, the named tensors (F32, given shapes) and labels.
std::unique_ptr<gguf::File> head_file(gguf::Writer& w, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                                      int labels = 0) {
    w.set("general.architecture", Value::string("llama"));
    w.set("llama.pooling_type", Value::u32(4));
    if (labels > 0) w.set("llama.classifier.output_labels", Value::strings(std::vector<std::string>(size_t(labels), "L")));
    for (const auto& [name, shape] : tensors) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        w.add_tensor(name, GgmlType::F32, shape, std::vector<uint8_t>(size_t(n) * 4, 0));
    }
    return w.view("bad-head");
}

std::string load_error(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors, int labels = 0) {
    gguf::Writer w;
    const auto f = head_file(w, tensors, labels);
    try {
        ClassifierHead::from_gguf(*f, "llama", 16);
    } catch (const Error& e) {
        return e.what();
    }
    return "(loaded)";
}

TEST(ClassifierHead, HeadsThatCannotBeAppliedAreLoadErrorsNamingWhy) {
    const auto has = [](const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; };
    std::string e = load_error({});
    EXPECT_TRUE(has(e, "pooling_type 4 (rank)") && has(e, "cls.output.weight") && has(e, "no classification head")) << e;
    e = load_error({{"cls.output.weight", {15, 1}}});  // not the hidden size
    EXPECT_TRUE(has(e, "'cls.output.weight' has shape [15, 1], expected [16, N]")) << e;
    e = load_error({{"cls.weight", {16, 8}}, {"cls.output.weight", {16, 1}}});  // does not chain
    EXPECT_TRUE(has(e, "'cls.output.weight' has shape [16, 1], expected [8, N]") && has(e, "outputs of 'cls.weight'")) << e;
    e = load_error({{"cls.output.weight", {16, 2, 2}}});
    EXPECT_TRUE(has(e, "'cls.output.weight' has shape [16, 2, 2]")) << e;
    e = load_error({{"cls.output.weight", {16, 2}}, {"cls.output.bias", {3}}});
    EXPECT_TRUE(has(e, "'cls.output.bias' has shape [3], expected [2]")) << e;
    e = load_error({{"cls.bias", {16}}, {"cls.output.weight", {16, 1}}});
    EXPECT_TRUE(has(e, "'cls.bias' is in the file without 'cls.weight'")) << e;
    e = load_error({{"cls.weight", {16, 16}}, {"cls.output.bias", {1}}});  // output bias without its weight
    EXPECT_TRUE(has(e, "'cls.output.bias' is in the file without 'cls.output.weight'")) << e;
    e = load_error({{"cls.output.weight", {16, 2}}}, 3);
    EXPECT_TRUE(has(e, "names 3 classes, but the head gives 2")) << e;
    // A vector stands for one output; a head without output layer classifies into cls.weight's rows.
    EXPECT_EQ(load_error({{"cls.output.weight", {16}}}), "(loaded)");
    EXPECT_EQ(load_error({{"cls.weight", {16, 4}}, {"cls.bias", {4}}}), "(loaded)");
}

}  // namespace
}  // namespace pagoda::model
