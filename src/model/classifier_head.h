// A reranker's classification head: a model file whose GGUF says {arch}.pooling_type 4 ("rank") is
// scored, as llama.cpp scores it, by a small head on one pooled final hidden state h (after the
// output norm), all optional parts named by llama.cpp's tensors:
//   dense   y = tanh(cls.weight · h + cls.bias)            hidden -> n   (RoBERTa/BERT style)
//   output  z = cls.output.weight · y + cls.output.bias    -> n_classes (an LLM classifier: h -> z)
// at least one of the two; biases may be absent. For qwen3, z is then softmaxed (Qwen3-Reranker
// converted as a classifier: classes "yes", "no"). The relevance score is the first class's value,
// as llama-server's /v1/rerank reports it (the raw logit for a one-class head, no sigmoid).
// The pooled token is the last: pagoda runs causal decoders only, where it is the one that has
// seen the whole pair (llama.cpp does the same for qwen3 and takes the first token for its
// bidirectional encoders, which pagoda does not load).
// The weights are read once at load (any GGUF weight type, dequantised) and applied on the CPU in
// double; the head is a few thousand multiply-adds per document.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

struct DenseLayer {
    std::string name;  // the weight tensor's name
    int64_t n_in = 0, n_out = 0;
    std::vector<float> weight;  // [n_out][n_in]
    std::vector<float> bias;    // n_out floats, or empty
};

class ClassifierHead {
public:
    // The head of a rank model (pooling_type 4), nullopt for any other model. Throws pagoda::Error
    // naming the tensor for a head that cannot be applied: none of cls.weight and
    // cls.output.weight, a bias without its weight, shapes that do not chain from `hidden_size`,
    // {arch}.classifier.output_labels that disagree with the classes.
    static std::optional<ClassifierHead> from_gguf(const gguf::File& file, const std::string& arch, int64_t hidden_size);

    int64_t hidden_size() const { return hidden_size_; }
    int64_t n_classes() const;
    const std::vector<std::string>& labels() const { return labels_; }  // empty when the file has none
    bool softmax() const { return softmax_; }
    const std::optional<DenseLayer>& dense() const { return dense_; }
    const std::optional<DenseLayer>& output() const { return output_; }

    // The class values for one pooled hidden state (hidden_size floats; throws otherwise).
    std::vector<double> classify(const std::vector<float>& pooled) const;
    // The relevance score: classify(pooled)[0].
    double score(const std::vector<float>& pooled) const { return classify(pooled)[0]; }
    // One line for the start-up log, e.g. "cls.weight 64->64, tanh, cls.output.weight 64->1".
    std::string describe() const;

private:
    int64_t hidden_size_ = 0;
    std::optional<DenseLayer> dense_, output_;
    bool softmax_ = false;
    std::vector<std::string> labels_;
};

}  // namespace pagoda::model
