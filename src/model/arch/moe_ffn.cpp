#include "model/arch/moe_ffn.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::model {
namespace {

std::string shape_string(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// Older Mixtral conversions store each expert as its own 2-D tensor, blk.N.ffn_gate.E.weight for
// the stacked blk.N.ffn_gate_exps.weight: read those when the stack is absent.
std::vector<backend::MatrixSource> legacy_slices(const gguf::File& f, const std::string& stacked, int64_t cols,
                                                 int64_t rows, int64_t n_experts) {
    const std::string stem = stacked.substr(0, stacked.size() - std::string("_exps.weight").size());
    if (!f.find_tensor(fmt::format("{}.0.weight", stem))) fail("{}: tensor {} is missing", f.name(), stacked);
    std::vector<backend::MatrixSource> out;
    for (int64_t e = 0; e < n_experts; ++e) {
        const std::string name = fmt::format("{}.{}.weight", stem, e);
        const auto* t = f.find_tensor(name);
        if (!t) fail("{}: tensor {} is missing", f.name(), name);
        const std::vector<int64_t> want = {cols, rows};
        if (t->shape != want)
            fail("{}: tensor {} has shape {}, expected {}", f.name(), name, shape_string(t->shape), shape_string(want));
        out.push_back({t->type, t->data, rows, cols, name, f.is_mapped()});
    }
    return out;
}

// The expert slices of a 3-D tensor [cols, rows, n_experts]: expert e's rows x cols matrix starts
// e * rows row sizes in (GGUF stores ne0 fastest, so each expert is contiguous).
std::vector<backend::MatrixSource> expert_slices(const gguf::File& f, const std::string& name, int64_t cols,
                                                 int64_t rows, int64_t n_experts) {
    const auto* t = f.find_tensor(name);
    if (!t) return legacy_slices(f, name, cols, rows, n_experts);
    const std::vector<int64_t> want = {cols, rows, n_experts};
    if (t->shape != want)
        fail("{}: tensor {} has shape {}, expected {}", f.name(), name, shape_string(t->shape), shape_string(want));
    const auto row = gguf::row_size(t->type, cols);
    if (!row) fail("{}: tensor {}: {} columns are not a multiple of the {} block", f.name(), name, cols,
                   gguf::type_name(uint32_t(t->type)));
    std::vector<backend::MatrixSource> out;
    for (int64_t e = 0; e < n_experts; ++e)
        out.push_back({t->type, t->data + uint64_t(e) * uint64_t(rows) * *row, rows, cols,
                       fmt::format("{}[{}]", name, e), f.is_mapped()});
    return out;
}

const backend::Weight& upload(const gguf::File& f, backend::Backend& b, BuiltModel& m,
                              std::vector<backend::MatrixSource> parts) {
    try {
        m.weights.push_back(b.upload_weight(std::move(parts), backend::WeightUse::matmul));
    } catch (const Error& err) {
        fail("{}: {}", f.name(), err.what());
    }
    return *m.weights.back();
}

// Expert e's slice of a stacked bias [n, n_experts] (one vector per expert), uploaded; empty when the
// file has no such tensor.
std::vector<const backend::Vector*> expert_biases(TensorBinder& bind, backend::Backend& b, BuiltModel& m,
                                                  const std::string& name, int64_t n, int64_t n_experts) {
    std::vector<const backend::Vector*> out;
    if (!bind.has(name)) return out;
    for (int64_t x = 0; x < n_experts; ++x) {
        const std::vector<float> v = bind.matrix_row(name, n, n_experts, x);
        m.vectors.push_back(b.upload_vector(v));
        out.push_back(m.vectors.back().get());
    }
    return out;
}

}  // namespace

backend::MoeRouting moe_routing(const ModelConfig& c) {
    backend::MoeRouting r;
    r.scoring = c.expert_gating == 2   ? backend::MoeScoring::sigmoid
                : c.expert_gating == 3 ? backend::MoeScoring::softmax_selected
                                       : backend::MoeScoring::softmax;
    r.scale = c.expert_weights_scale;
    r.n_groups = int32_t(c.expert_groups);
    r.n_groups_used = int32_t(c.expert_groups_used);
    return r;
}

int emit_swiglu_ffn(GraphEmitter& e, TensorBinder& bind, const ModelConfig& c, int32_t layer, int h) {
    const std::string p = fmt::format("blk.{}.", layer);
    const auto& gate_up = bind.matrix({{p + "ffn_gate.weight", c.dim, c.layer_ffn_dim(layer)}, {p + "ffn_up.weight", c.dim, c.layer_ffn_dim(layer)}});
    const auto& down = bind.matrix({{p + "ffn_down.weight", c.layer_ffn_dim(layer), c.dim}});
    const auto g_u = e.matmul(gate_up, h, {p + "gate", p + "up"}, layer, MatmulInput::ffn);
    const int act = e.silu_mul(g_u[0], g_u[1], p + "ffn_act");
    return e.matmul(down, act, {p + "ffn_out"}, layer, MatmulInput::ffn_down)[0];
}

int emit_moe_ffn(GraphEmitter& e, TensorBinder& bind, const gguf::File& file, const ModelConfig& c,
                 backend::Backend& b, BuiltModel& m, int64_t layer, int h, const MoeFfnOptions& options) {
    const std::string p = fmt::format("blk.{}.", layer);
    const auto l = int32_t(layer);
    const int64_t n = c.n_experts, f = c.expert_ffn_dim;
    const auto& router = bind.matrix({{p + "ffn_gate_inp.weight", c.dim, n}});
    backend::MoeOp op;
    op.n_used = int32_t(c.n_experts_used);
    op.normalize = c.expert_weights_norm;
    op.routing = moe_routing(c);
    op.activation = options.activation;
    if (bind.has(p + "exp_probs_b.bias")) op.routing.correction_bias = bind.floats(p + "exp_probs_b.bias", n);
    if (bind.has(p + "ffn_down_exps.scale")) {
        op.routing.expert_scale = bind.floats(p + "ffn_down_exps.scale", n);
        for (float v : op.routing.expert_scale)
            if (!std::isfinite(v)) fail("{}: {}ffn_down_exps.scale holds a non-finite value {}", file.name(), p, v);
    }
    std::vector<backend::MatrixSource> gate, up;
    const std::string fused = p + "ffn_gate_up_exps.weight";
    if (file.find_tensor(fused) && !file.find_tensor(p + "ffn_gate_exps.weight")) {
        // gate|up in one stack [dim, 2 ffn, E]: each expert's gate rows, then its up rows.
        for (auto& both : expert_slices(file, fused, c.dim, 2 * f, n)) {
            const uint64_t half = uint64_t(f) * *gguf::row_size(both.type, c.dim);
            gate.push_back({both.type, both.data, f, c.dim, both.name + ".gate", both.file_mapped});
            up.push_back({both.type, static_cast<const uint8_t*>(both.data) + half, f, c.dim, both.name + ".up", both.file_mapped});
        }
    } else {
        gate = expert_slices(file, p + "ffn_gate_exps.weight", c.dim, f, n);
        up = expert_slices(file, p + "ffn_up_exps.weight", c.dim, f, n);
    }
    const auto down = expert_slices(file, p + "ffn_down_exps.weight", f, c.dim, n);
    for (int64_t x = 0; x < n; ++x) {
        op.gate_up.push_back(&upload(file, b, m, {gate[size_t(x)], up[size_t(x)]}));
        op.down.push_back(&upload(file, b, m, {down[size_t(x)]}));
    }
    if (bind.has(p + "ffn_gate_up_exps.bias")) {  // [2 ffn, E]: gate's then up's, per expert
        for (int64_t x = 0; x < n; ++x) {
            const std::vector<float> v = bind.matrix_row(p + "ffn_gate_up_exps.bias", 2 * f, n, x);
            m.vectors.push_back(b.upload_vector(std::span<const float>(v.data(), size_t(f))));
            op.gate_bias.push_back(m.vectors.back().get());
            m.vectors.push_back(b.upload_vector(std::span<const float>(v.data() + f, size_t(f))));
            op.up_bias.push_back(m.vectors.back().get());
        }
    } else {
        op.gate_bias = expert_biases(bind, b, m, p + "ffn_gate_exps.bias", f, n);
        op.up_bias = expert_biases(bind, b, m, p + "ffn_up_exps.bias", f, n);
    }
    op.down_bias = expert_biases(bind, b, m, p + "ffn_down_exps.bias", c.dim, n);
    if (options.shared_expert) {
        const int64_t fs = c.shared_expert_ffn_dim;
        op.shared_gate_up = &bind.matrix({{p + "ffn_gate_shexp.weight", c.dim, fs}, {p + "ffn_up_shexp.weight", c.dim, fs}});
        op.shared_down = &bind.matrix({{p + "ffn_down_shexp.weight", fs, c.dim}});
        if (options.shared_gate) op.shared_gate = &bind.vector(p + "ffn_gate_inp_shexp.weight", c.dim);
    }
    const int logits = e.matmul(router, options.router_input >= 0 ? options.router_input : h, {p + "router"}, l, MatmulInput::none)[0];
    if (bind.has(p + "ffn_gate_inp.bias")) e.add_bias(logits, bind.vector(p + "ffn_gate_inp.bias", n));
    Graph& g = m.graph;
    const int out = g.add_tensor(p + "ffn_out", Rows::tokens, c.dim);
    const int ws = g.add_tensor(p + "moe_workspace", Rows::tokens, b.moe_workspace_cols(op));
    Node node;
    node.kind = OpKind::moe_ffn;
    node.in = {h, logits};
    node.out = {out, ws};
    node.layer = l;
    node.moe = std::move(op);
    g.nodes.push_back(std::move(node));
    return out;
}

}  // namespace pagoda::model
