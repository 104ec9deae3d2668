#include "vision/vit_block.h"

#include <span>

#include "core/error.h"
#include "vision/mmproj_tensors.h"

namespace pagoda::vision {

VitLayer load_vit_layer(const gguf::File& file, backend::Backend& b, const std::string& p, int64_t d, int64_t n_ff,
                        const VitNames& names) {
    auto vec = [&](const std::string& name) { return b.upload_vector(tensor_floats(file, name)); };
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
        return b.upload_weight({matrix_source(file, name, rows, cols)}, backend::WeightUse::matmul);
    };
    VitLayer L;
    if (names.fused_qkv) {
        const std::string w = p + "attn_qkv.weight";
        L.qkv = b.upload_weight({matrix_source(file, w, d, d, 0), matrix_source(file, w, d, d, d),
                                 matrix_source(file, w, d, d, 2 * d)},
                                backend::WeightUse::matmul);
        const std::vector<float> bias = tensor_floats(file, p + "attn_qkv.bias");
        if (int64_t(bias.size()) != 3 * d) fail("{}: {}attn_qkv.bias has {} values, not 3 x {}", file.name(), p, bias.size(), d);
        L.q_b = b.upload_vector(std::span(bias).subspan(0, size_t(d)));
        L.k_b = b.upload_vector(std::span(bias).subspan(size_t(d), size_t(d)));
        L.v_b = b.upload_vector(std::span(bias).subspan(size_t(2 * d), size_t(d)));
    } else {
        L.qkv = b.upload_weight({matrix_source(file, p + "attn_q.weight", d, d), matrix_source(file, p + "attn_k.weight", d, d),
                                 matrix_source(file, p + "attn_v.weight", d, d)},
                                backend::WeightUse::matmul);
        L.q_b = vec(p + "attn_q.bias");
        L.k_b = vec(p + "attn_k.bias");
        L.v_b = vec(p + "attn_v.bias");
    }
    L.out = matrix(p + "attn_out.weight", d, d);
    L.out_b = vec(p + "attn_out.bias");
    L.up = matrix(p + names.ffn_up + ".weight", n_ff, d);
    L.up_b = vec(p + names.ffn_up + ".bias");
    L.down = matrix(p + names.ffn_down + ".weight", d, n_ff);
    L.down_b = vec(p + names.ffn_down + ".bias");
    L.ln1_w = vec(p + "ln1.weight");
    L.ln1_b = vec(p + "ln1.bias");
    L.ln2_w = vec(p + "ln2.weight");
    L.ln2_b = vec(p + "ln2.bias");
    return L;
}

void run_vit_block(backend::Backend& b, const VitLayer& L, int32_t layer, const backend::Tensor& x,
                   const VitScratch& s, const VitAttention& a, float eps) {
    b.layer_norm(x, *L.ln1_w, *L.ln1_b, eps, s.h);
    const backend::Tensor qkv[3] = {s.q, s.k, s.v};
    b.matmul(*L.qkv, s.h, qkv);
    b.add_bias(s.q, *L.q_b);
    b.add_bias(s.k, *L.k_b);
    b.add_bias(s.v, *L.v_b);
    if (a.rope) {
        b.rope(s.q, *a.rope, a.heads, a.head_dim);
        b.rope(s.k, *a.rope, a.heads, a.head_dim);
    }
    b.kv_write(*a.cache, layer, s.k, s.v);
    b.attention(*a.cache, layer, s.q, s.attn, a.params);
    const backend::Tensor o_out[1] = {s.o};
    b.matmul(*L.out, s.attn, o_out);
    b.add_bias(s.o, *L.out_b);
    b.add(x, s.o);
    b.layer_norm(x, *L.ln2_w, *L.ln2_b, eps, s.h);
    const backend::Tensor up_out[1] = {s.up};
    b.matmul(*L.up, s.h, up_out);
    b.add_bias(s.up, *L.up_b);
    b.gelu_mul(s.up, s.ones, s.up);  // gelu_pytorch_tanh
    b.matmul(*L.down, s.up, o_out);
    b.add_bias(s.o, *L.down_b);
    b.add(x, s.o);
}

backend::Tensor ActivationArena::tensor(int64_t rows, int64_t cols) {
    const auto n = size_t(rows * cols);
    if (used_ + n > capacity_) fail("vision tower: activation arena too small (internal error)");
    backend::Tensor t{static_cast<uint8_t*>(b_.activations()) + used_ * b_.activation_size(), rows, cols};
    used_ += n;
    return t;
}

}  // namespace pagoda::vision
