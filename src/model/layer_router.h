// The backend an architecture builder uploads to under a partial offload (layer_split.h): a facade
// over the device and the host backend that puts each weight where its layer runs, so the builders
// stay unchanged. A "blk.N." matrix goes to layer N's backend; the token embedding (and gemma4's
// per_layer_* inputs) to the host, which runs the input (layer_split.h); the output head (and any
// other matrix outside the layers) to the head's; a tied embedding/head to both when they differ. Vectors and ropes are small and unnamed: both backends get
// them. The builder's graph points at the router's handles; rebind() points a segment's ops at its
// own backend's. Only the upload and capability calls are the router's: it runs no op.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "model/graph.h"
#include "model/layer_split.h"

namespace pagoda::model {

class LayerRouter final : public backend::Backend {
public:
    LayerRouter(backend::Backend& device, backend::Backend& host, const LayerSplit& split)
        : device_(device), host_(host), split_(split) {}

    // Points every weight, vector and rope of `graph`'s ops at `side`'s copy. Throws when one has none.
    void rebind(Graph& graph, Side side) const;

    std::string name() const override;
    std::string describe() const override;
    size_t activation_size() const override { return host_.activation_size(); }
    std::shared_ptr<backend::Weight> upload_weight(std::vector<backend::MatrixSource> parts, backend::WeightUse use) override;
    std::shared_ptr<backend::Vector> upload_vector(std::span<const float> values) override;
    std::shared_ptr<backend::Rope> upload_rope(backend::RopeSpec spec) override;
    bool supports(backend::OpKind op) const override { return device_.supports(op) && host_.supports(op); }
    // Checked per segment once the graph is cut (GraphModel), where the layer is known.
    bool supports_attention(const backend::AttentionParams&) const override { return true; }
    int64_t moe_workspace_cols(const backend::MoeOp& op) const override;

    // Not the router's: each throws.
    std::unique_ptr<backend::KvCache> create_kv_cache(const kv::KvLayout&, int64_t) override;
    void reserve_activations(size_t, int64_t) override;
    void* activations() override;
    void read(const backend::Tensor&, float*) const override;
    void write(const backend::Tensor&, const float*) override;
    void begin_step(const backend::StepInputs&) override;
    void embed(const backend::Weight&, const backend::Tensor&) override;
    void matmul(const backend::Weight&, const backend::Tensor&, std::span<const backend::Tensor>,
                const backend::Tensor*) override;
    void rms_norm(const backend::Tensor&, const backend::Vector&, float, const backend::Tensor&) override;
    void add(const backend::Tensor&, const backend::Tensor&) override;
    void add_bias(const backend::Tensor&, const backend::Vector&) override;
    void rope(const backend::Tensor&, const backend::Rope&, int32_t, int32_t) override;
    void silu_mul(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&) override;
    void gelu_mul(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&) override;
    void softmax(const backend::Tensor&) override;
    void scale(const backend::Tensor&, float) override;
    void softcap(const backend::Tensor&, float) override;
    void kv_write(backend::KvCache&, int32_t, const backend::Tensor&, const backend::Tensor&) override;
    void attention(const backend::KvCache&, int32_t, const backend::Tensor&, const backend::Tensor&,
                   const backend::AttentionParams&) override;
    void gather_logit_rows(const backend::Tensor&, const backend::Tensor&) override;
    void gather_hidden_rows(const backend::Tensor&, const backend::Tensor&) override;
    std::string describe_matmul(const backend::Weight& w, int64_t n_tokens) const override;
    backend::MatmulArithmetic matmul_arithmetic(const backend::Weight& w, int64_t n_tokens) const override;

private:
    backend::Backend& backend_of(Side side) const { return side == Side::device ? device_ : host_; }

    backend::Backend& device_;
    backend::Backend& host_;
    LayerSplit split_;
};

}  // namespace pagoda::model
