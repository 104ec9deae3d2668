// Appends ops to a Graph with their output tensors, for the architecture builders: each call is one
// node, named after the model's own tensors so `pagoda graph` reads like the architecture.
#pragma once
#include <string>
#include <vector>

#include "model/graph.h"

namespace pagoda::model {

class GraphEmitter {
public:
    explicit GraphEmitter(Graph& g) : g_(g) {}

    int embed(const backend::Weight& table, const std::string& name) {
        const int out = g_.add_tensor(name, Rows::tokens, table.cols());
        push({.kind = OpKind::embed, .out = {out}, .weight = &table});
        return out;
    }
    // In place: the rows given an embedding (an image's) take it (OpKind::input_embeddings).
    void input_embeddings(int x) { push({.kind = OpKind::input_embeddings, .in = {x}, .out = {x}}); }
    // In place, rows of `slices` slices each: slice 0 replaces the given rows, slice k > 0 is added
    // to them (deep-stack; `layer` tags the op for layer splits).
    void input_embeddings(int x, int32_t slice, int32_t slices, int32_t layer) {
        push({.kind = OpKind::input_embeddings, .in = {x}, .out = {x}, .layer = layer, .embedding_slice = slice,
              .embedding_slices = slices});
    }
    // One output per part of the weight, with the input's rows.
    std::vector<int> matmul(const backend::Weight& w, int x, const std::vector<std::string>& names, int32_t layer,
                            MatmulInput role) {
        std::vector<int> outs;
        for (size_t p = 0; p < w.parts().size(); ++p)
            outs.push_back(g_.add_tensor(names.at(p), rows(x), w.parts()[p].rows));
        push({.kind = OpKind::matmul, .in = {x}, .out = outs, .weight = &w, .layer = layer, .role = role});
        return outs;
    }
    int rms_norm(int x, const backend::Vector& w, float eps, const std::string& name) {
        const int out = g_.add_tensor(name, rows(x), cols(x));
        push({.kind = OpKind::rms_norm, .in = {x}, .out = {out}, .vector = &w, .eps = eps});
        return out;
    }
    // In place, each of the rows' n_heads heads normalised on its own (Q/K norms).
    void rms_norm_heads(int x, const backend::Vector& w, float eps, int32_t n_heads) {
        push({.kind = OpKind::rms_norm, .in = {x}, .out = {x}, .vector = &w, .eps = eps, .n_heads = n_heads});
    }
    int layer_norm(int x, const backend::Vector& w, const backend::Vector& b, float eps, const std::string& name) {
        const int out = g_.add_tensor(name, rows(x), cols(x));
        push({.kind = OpKind::layer_norm, .in = {x}, .out = {out}, .vector = &w, .bias = &b, .eps = eps});
        return out;
    }
    void gelu(int x) { push({.kind = OpKind::gelu, .in = {x}, .out = {x}}); }
    void add_position_embedding(int x, const backend::Weight& table) {
        push({.kind = OpKind::position_embedding, .in = {x}, .out = {x}, .weight = &table});
    }
    void add_token_type_embedding(int x, const backend::Weight& table) {
        push({.kind = OpKind::token_type_embedding, .in = {x}, .out = {x}, .weight = &table});
    }
    void add(int y, int x) { push({.kind = OpKind::add, .in = {y, x}, .out = {y}}); }
    void add_bias(int y, const backend::Vector& b) { push({.kind = OpKind::add_bias, .in = {y}, .out = {y}, .vector = &b}); }
    void rope(int x, const backend::Rope& r, int32_t n_heads, int32_t head_dim) {
        push({.kind = OpKind::rope, .in = {x}, .out = {x}, .rope = &r, .n_heads = n_heads, .head_dim = head_dim});
    }
    int silu_mul(int gate, int up, const std::string& name) {
        const int out = g_.add_tensor(name, rows(gate), cols(gate));
        push({.kind = OpKind::silu_mul, .in = {gate, up}, .out = {out}});
        return out;
    }
    void kv_write(int32_t layer, int k, int v) { push({.kind = OpKind::kv_write, .in = {k, v}, .layer = layer}); }
    int attention(int32_t layer, int q, const backend::AttentionParams& p, int32_t head_dim, const std::string& name) {
        const int out = g_.add_tensor(name, rows(q), cols(q));
        push({.kind = OpKind::attention, .in = {q}, .out = {out}, .layer = layer, .n_heads = p.n_heads,
              .head_dim = head_dim, .attention = p});
        return out;
    }
    // dst takes c's column ranges of src (backend::ColumnCopy); dst < 0 makes a new tensor of
    // dst_cols columns (its other columns unset), else dst is updated in place. Returns dst.
    int copy_columns(int src, int dst, const backend::ColumnCopy& c, int64_t dst_cols, const std::string& name) {
        if (dst < 0) {
            dst = g_.add_tensor(name, rows(src), dst_cols);
            push({.kind = OpKind::copy_columns, .in = {src}, .out = {dst}, .columns = c});
        } else {
            push({.kind = OpKind::copy_columns, .in = {src, dst}, .out = {dst}, .columns = c});
        }
        return dst;
    }
    // In place on the queries q: each row times its position's attention temperature.
    void attn_temperature(int q, const backend::AttnTemperature& t, int32_t layer) {
        push({.kind = OpKind::attn_temperature, .in = {q}, .out = {q}, .layer = layer, .temperature = t});
    }
    // In place: x *= s; x = cap * tanh(x / cap).
    void scale(int x, float s) { push({.kind = OpKind::scale, .in = {x}, .out = {x}, .value = s}); }
    void softcap(int x, float cap) { push({.kind = OpKind::softcap, .in = {x}, .out = {x}, .value = cap}); }
    // sigmoid(gate) * up (OpKind::sigmoid_mul).
    int sigmoid_mul(int gate, int up, const std::string& name) {
        const int out = g_.add_tensor(name, rows(gate), cols(gate));
        push({.kind = OpKind::sigmoid_mul, .in = {gate, up}, .out = {out}});
        return out;
    }
    int gelu_mul(int gate, int up, const std::string& name) {
        const int out = g_.add_tensor(name, rows(gate), cols(gate));
        push({.kind = OpKind::gelu_mul, .in = {gate, up}, .out = {out}});
        return out;
    }
    int gather_logit_rows(int x, const std::string& name) {
        const int out = g_.add_tensor(name, Rows::logits, cols(x));
        push({.kind = OpKind::gather_logit_rows, .in = {x}, .out = {out}});
        return out;
    }
    int gather_hidden_rows(int x, const std::string& name) {
        const int out = g_.add_tensor(name, Rows::hidden, cols(x));
        push({.kind = OpKind::gather_hidden_rows, .in = {x}, .out = {out}});
        return out;
    }

private:
    Rows rows(int id) const { return g_.tensors[size_t(id)].rows; }
    int64_t cols(int id) const { return g_.tensors[size_t(id)].cols; }
    void push(Node n) { g_.nodes.push_back(std::move(n)); }

    Graph& g_;
};

}  // namespace pagoda::model
