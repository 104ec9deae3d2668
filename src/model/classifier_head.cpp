#include "model/classifier_head.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "core/error.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "quant/dequantize.h"

namespace pagoda::model {
namespace {

using gguf::GgmlType;

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// The tensor's values as floats, whatever its weight type.
std::vector<float> read_floats(const gguf::TensorInfo& t) {
    const int64_t n = t.n_elements();
    std::vector<float> out(static_cast<size_t>(n));
    switch (t.type) {
        case GgmlType::F32: std::memcpy(out.data(), t.data, size_t(n) * 4); break;
        case GgmlType::F16:
        case GgmlType::BF16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, t.data + 2 * i, 2);
                out[size_t(i)] = t.type == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
            break;
        default:
            if (!quant::is_supported_block_type(t.type))
                fail("classification head: tensor '{}' has weight type {}, which pagoda cannot read", t.name,
                     gguf::type_name(uint32_t(t.type)));
            quant::dequantize_row(t.type, t.data, out.data(), n);
    }
    for (float v : out)
        if (!std::isfinite(v)) fail("classification head: tensor '{}' holds a value that is not finite", t.name);
    return out;
}

// A weight [n_in, n_out] in GGUF order (n_out 1 may be written as a vector of n_in), with its
// optional bias of n_out.
DenseLayer read_layer(const gguf::File& file, const std::string& weight_name, const std::string& bias_name,
                      int64_t n_in, const std::string& input_what) {
    const gguf::TensorInfo* w = file.find_tensor(weight_name);
    DenseLayer layer;
    layer.name = weight_name;
    const auto& s = w->shape;
    if (s.empty() || s.size() > 2 || s[0] != n_in)
        fail("classification head: tensor '{}' has shape {}, expected [{}, N] ({} inputs: {})", weight_name,
             shape_text(s), n_in, n_in, input_what);
    layer.n_in = n_in;
    layer.n_out = s.size() == 2 ? s[1] : 1;
    if (layer.n_out < 1) fail("classification head: tensor '{}' has shape {}, with no outputs", weight_name, shape_text(s));
    layer.weight = read_floats(*w);
    if (const gguf::TensorInfo* b = file.find_tensor(bias_name)) {
        if (b->n_elements() != layer.n_out || b->shape.size() > 2 || (b->shape.size() == 2 && b->shape[1] != 1))
            fail("classification head: tensor '{}' has shape {}, expected [{}] (one per output of '{}')", bias_name,
                 shape_text(b->shape), layer.n_out, weight_name);
        layer.bias = read_floats(*b);
    }
    return layer;
}

std::vector<double> apply_layer(const DenseLayer& layer, const std::vector<double>& x) {
    std::vector<double> y(size_t(layer.n_out));
    for (int64_t o = 0; o < layer.n_out; ++o) {
        const float* row = layer.weight.data() + o * layer.n_in;
        double sum = layer.bias.empty() ? 0.0 : double(layer.bias[size_t(o)]);
        for (int64_t i = 0; i < layer.n_in; ++i) sum += double(row[i]) * x[size_t(i)];
        y[size_t(o)] = sum;
    }
    return y;
}

}  // namespace

std::optional<ClassifierHead> ClassifierHead::from_gguf(const gguf::File& file, const std::string& arch,
                                                        int64_t hidden_size) {
    if (file.get_int_or(arch + ".pooling_type", 0) != 4) return std::nullopt;
    const bool has_dense = file.find_tensor("cls.weight") != nullptr;
    const bool has_output = file.find_tensor("cls.output.weight") != nullptr;
    if (!has_dense && !has_output)
        fail("the model says {}.pooling_type 4 (rank) but has no classification head: neither 'cls.weight' nor "
             "'cls.output.weight' is in the file",
             arch);
    if (!has_dense && file.find_tensor("cls.bias"))
        fail("classification head: 'cls.bias' is in the file without 'cls.weight'");
    if (!has_output && file.find_tensor("cls.output.bias"))
        fail("classification head: 'cls.output.bias' is in the file without 'cls.output.weight'");
    if (hidden_size < 1) fail("classification head: the model gives no hidden states to classify");

    ClassifierHead head;
    head.hidden_size_ = hidden_size;
    int64_t width = hidden_size;
    std::string what = "the model's hidden size";
    if (has_dense) {
        head.dense_ = read_layer(file, "cls.weight", "cls.bias", width, what);
        width = head.dense_->n_out;
        what = "the outputs of 'cls.weight'";
    }
    if (has_output) head.output_ = read_layer(file, "cls.output.weight", "cls.output.bias", width, what);
    // llama.cpp softmaxes the classes of a qwen3 classifier (its converted Qwen3-Reranker: yes, no).
    head.softmax_ = arch == "qwen3";
    if (const gguf::Value* v = file.find(arch + ".classifier.output_labels")) {
        if (!v->as_array()) fail("classification head: '{}.classifier.output_labels' is not an array", arch);
        head.labels_ = file.get_strings(arch + ".classifier.output_labels");
        if (int64_t(head.labels_.size()) != head.n_classes())
            fail("classification head: '{}.classifier.output_labels' names {} classes, but the head gives {}", arch,
                 head.labels_.size(), head.n_classes());
    }
    return head;
}

int64_t ClassifierHead::n_classes() const {
    return output_ ? output_->n_out : dense_ ? dense_->n_out : 0;
}

std::vector<double> ClassifierHead::classify(const std::vector<float>& pooled) const {
    if (int64_t(pooled.size()) != hidden_size_)
        fail("classification head: a pooled state of {} values, expected {}", pooled.size(), hidden_size_);
    std::vector<double> x(pooled.begin(), pooled.end());
    if (dense_) {
        x = apply_layer(*dense_, x);
        for (double& v : x) v = std::tanh(v);
    }
    if (output_) x = apply_layer(*output_, x);
    if (softmax_) {
        double top = x[0];
        for (double v : x) top = std::max(top, v);
        double sum = 0;
        for (double& v : x) sum += (v = std::exp(v - top));
        for (double& v : x) v /= sum;
    }
    return x;
}

std::string ClassifierHead::describe() const {
    std::string s;
    if (dense_) s = fmt::format("cls.weight {}->{}, tanh", dense_->n_in, dense_->n_out);
    if (output_) s += fmt::format("{}cls.output.weight {}->{}", s.empty() ? "" : ", ", output_->n_in, output_->n_out);
    if (softmax_) s += ", softmax";
    return s;
}

}  // namespace pagoda::model
