#include "model/layer_router.h"

#include <fmt/format.h>
#include <type_traits>

#include "core/error.h"

namespace pagoda::model {
namespace {

// A router handle: the same object uploaded to the device (index 0) and / or the host (index 1).
template <class T>
struct Sides {
    std::shared_ptr<T> at[2];
    const T* get(Side s) const { return at[s == Side::device ? 0 : 1].get(); }
};

class RoutedWeight final : public backend::Weight, public Sides<backend::Weight> {
public:
    explicit RoutedWeight(std::vector<backend::MatrixSource> parts) : Weight(std::move(parts)) {}
    std::vector<std::span<const uint8_t>> host_memory() const override {
        std::vector<std::span<const uint8_t>> out;
        for (const auto& w : at)
            if (w)
                for (auto span : w->host_memory()) out.push_back(span);
        return out;
    }
};

class RoutedVector final : public backend::Vector, public Sides<backend::Vector> {
public:
    explicit RoutedVector(int64_t n) : Vector(n) {}
};

class RoutedRope final : public backend::Rope, public Sides<backend::Rope> {
public:
    explicit RoutedRope(backend::RopeSpec spec) : Rope(std::move(spec)) {}
};

template <class Routed, class T>
const T* resolve(const T* handle, Side side, const char* what) {
    if (!handle) return nullptr;
    const auto* routed = dynamic_cast<const Routed*>(handle);
    if (!routed) fail("partial offload: a {} the layer router did not upload", what);
    const T* real = routed->get(side);
    if (!real) {
        if constexpr (std::is_same_v<T, backend::Weight>)
            fail("partial offload: weight '{}' is not on the {} backend that runs the op reading it",
                 handle->parts().empty() ? "" : handle->parts()[0].name, side == Side::device ? "device" : "host");
        fail("partial offload: a {} is not on the backend that runs the op reading it", what);
    }
    return real;
}

[[noreturn]] void not_the_routers(const char* op) {
    fail("internal: the layer router only uploads weights; {} runs on a segment's own backend", op);
}

}  // namespace

std::string LayerRouter::name() const { return device_.name() + "+" + host_.name(); }

std::string LayerRouter::describe() const {
    return fmt::format("token embedding on {}, layers 0..{} on {}, {}..{} on {}", host_.name(), split_.device_layers - 1,
                       device_.name(), split_.device_layers, split_.n_layers - 1, host_.name());
}

std::shared_ptr<backend::Weight> LayerRouter::upload_weight(std::vector<backend::MatrixSource> parts,
                                                            backend::WeightUse use) {
    if (parts.empty()) fail("layer router: a weight needs at least one part");
    const int32_t layer = layer_of_tensor_name(parts[0].name);
    const Side input = LayerSplit::input_side, head = Side::host;
    bool on[2] = {false, false};
    auto put = [&](Side s) { on[s == Side::device ? 0 : 1] = true; };
    if (layer >= 0) {
        if (layer >= split_.n_layers)
            fail("{}: layer {} is past the model's {} layers", parts[0].name, layer, split_.n_layers);
        put(split_.side_of_layer(layer));
    } else if (parts[0].name.rfind("per_layer_", 0) == 0) {
        put(input);  // gemma4's per-layer embedding inputs: computed beside the token embedding
    } else {
        if (use != backend::WeightUse::matmul) put(input);
        if (use != backend::WeightUse::embedding) put(head);
    }
    auto routed = std::make_shared<RoutedWeight>(parts);
    for (const Side s : {Side::device, Side::host})
        if (on[s == Side::device ? 0 : 1]) routed->at[s == Side::device ? 0 : 1] = backend_of(s).upload_weight(parts, use);
    return routed;
}

std::shared_ptr<backend::Vector> LayerRouter::upload_vector(std::span<const float> values) {
    auto routed = std::make_shared<RoutedVector>(int64_t(values.size()));
    routed->at[0] = device_.upload_vector(values);
    routed->at[1] = host_.upload_vector(values);
    return routed;
}

std::shared_ptr<backend::Rope> LayerRouter::upload_rope(backend::RopeSpec spec) {
    auto routed = std::make_shared<RoutedRope>(spec);
    routed->at[0] = device_.upload_rope(spec);
    routed->at[1] = host_.upload_rope(std::move(spec));
    return routed;
}

int64_t LayerRouter::moe_workspace_cols(const backend::MoeOp& op) const {
    const int32_t layer =
        op.gate_up.empty() || op.gate_up[0]->parts().empty() ? -1 : layer_of_tensor_name(op.gate_up[0]->parts()[0].name);
    if (layer >= 0 && split_.side_of_layer(layer) == Side::device) {
        try {
            return device_.moe_workspace_cols(op);
        } catch (const Error& e) {
            fail("-ngl {}: layer {} is a mixture-of-experts layer, which the {} backend cannot run ({}); offload "
                 "fewer layers or none", split_.device_layers, layer, device_.name(), e.what());
        }
    }
    return host_.moe_workspace_cols(op);
}

void LayerRouter::rebind(Graph& graph, Side side) const {
    auto weight = [&](const backend::Weight*& w) { w = resolve<RoutedWeight>(w, side, "weight"); };
    auto vector = [&](const backend::Vector*& v) { v = resolve<RoutedVector>(v, side, "vector"); };
    for (Node& n : graph.nodes) {
        weight(n.weight);
        vector(n.vector);
        vector(n.bias);
        n.rope = resolve<RoutedRope>(n.rope, side, "rope");
        vector(n.attention.sinks);
        weight(n.qkv.qkv);
        for (auto*& b : n.qkv.bias) vector(b);
        n.qkv.rope = resolve<RoutedRope>(n.qkv.rope, side, "rope");
        for (auto*& w : n.moe.gate_up) weight(w);
        for (auto*& w : n.moe.down) weight(w);
        for (auto*& v : n.moe.gate_bias) vector(v);
        for (auto*& v : n.moe.up_bias) vector(v);
        for (auto*& v : n.moe.down_bias) vector(v);
        weight(n.moe.shared_gate_up);
        weight(n.moe.shared_down);
        vector(n.moe.shared_gate);
    }
}

std::string LayerRouter::describe_matmul(const backend::Weight& w, int64_t n_tokens) const {
    const auto& r = dynamic_cast<const RoutedWeight&>(w);
    return r.get(Side::host) ? host_.describe_matmul(*r.get(Side::host), n_tokens)
                             : device_.describe_matmul(*r.get(Side::device), n_tokens);
}

backend::MatmulArithmetic LayerRouter::matmul_arithmetic(const backend::Weight& w, int64_t n_tokens) const {
    const auto& r = dynamic_cast<const RoutedWeight&>(w);
    return r.get(Side::host) ? host_.matmul_arithmetic(*r.get(Side::host), n_tokens)
                             : device_.matmul_arithmetic(*r.get(Side::device), n_tokens);
}

std::unique_ptr<backend::KvCache> LayerRouter::create_kv_cache(const kv::KvLayout&, int64_t) { not_the_routers("create_kv_cache"); }
void LayerRouter::reserve_activations(size_t, int64_t) { not_the_routers("reserve_activations"); }
void* LayerRouter::activations() { not_the_routers("activations"); }
void LayerRouter::read(const backend::Tensor&, float*) const { not_the_routers("read"); }
void LayerRouter::write(const backend::Tensor&, const float*) { not_the_routers("write"); }
void LayerRouter::begin_step(const backend::StepInputs&) { not_the_routers("begin_step"); }
void LayerRouter::embed(const backend::Weight&, const backend::Tensor&) { not_the_routers("embed"); }
void LayerRouter::matmul(const backend::Weight&, const backend::Tensor&, std::span<const backend::Tensor>,
                         const backend::Tensor*) { not_the_routers("matmul"); }
void LayerRouter::rms_norm(const backend::Tensor&, const backend::Vector&, float, const backend::Tensor&) { not_the_routers("rms_norm"); }
void LayerRouter::add(const backend::Tensor&, const backend::Tensor&) { not_the_routers("add"); }
void LayerRouter::add_bias(const backend::Tensor&, const backend::Vector&) { not_the_routers("add_bias"); }
void LayerRouter::rope(const backend::Tensor&, const backend::Rope&, int32_t, int32_t) { not_the_routers("rope"); }
void LayerRouter::silu_mul(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&) { not_the_routers("silu_mul"); }
void LayerRouter::gelu_mul(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&) { not_the_routers("gelu_mul"); }
void LayerRouter::softmax(const backend::Tensor&) { not_the_routers("softmax"); }
void LayerRouter::scale(const backend::Tensor&, float) { not_the_routers("scale"); }
void LayerRouter::softcap(const backend::Tensor&, float) { not_the_routers("softcap"); }
void LayerRouter::kv_write(backend::KvCache&, int32_t, const backend::Tensor&, const backend::Tensor&) { not_the_routers("kv_write"); }
void LayerRouter::attention(const backend::KvCache&, int32_t, const backend::Tensor&, const backend::Tensor&,
                            const backend::AttentionParams&) { not_the_routers("attention"); }
void LayerRouter::gather_logit_rows(const backend::Tensor&, const backend::Tensor&) { not_the_routers("gather_logit_rows"); }
void LayerRouter::gather_hidden_rows(const backend::Tensor&, const backend::Tensor&) { not_the_routers("gather_hidden_rows"); }

}  // namespace pagoda::model
