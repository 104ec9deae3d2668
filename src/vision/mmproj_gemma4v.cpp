// The gemma4v projector's metadata and tensors (mmproj.h), as llama.cpp's converter writes Gemma 4's
// vision tower (tensor list in gemma4v_tower.h). Every key and tensor is checked before anything is
// uploaded, and a tensor outside the layout is refused by name rather than ignored (a file carrying
// biases or layer scales this reader does not apply would otherwise encode images wrongly).
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "vision/mmproj.h"

namespace pagoda::vision {

namespace {

// Gemma4ClippableLinear's bounds: scalars beside a matrix, NAME.{input,output}_{min,max}.
constexpr const char* kClampSuffixes[] = {".input_min", ".input_max", ".output_min", ".output_max"};

}  // namespace

void read_gemma4v_config(const gguf::File& f, VisionConfig& c) {
    // Gemma4ImageProcessor's defaults: pooling_kernel_size 3, max_soft_tokens 280; llama.cpp reads the
    // kernel from the scale factor and fixes the 2D RoPE base at 100 (Gemma4VisionConfig's rope_theta).
    c.pool = f.has("clip.vision.projector.scale_factor") ? f.get_int("clip.vision.projector.scale_factor") : 3;
    if (c.pool < 1 || c.pool > 16) fail("{}: clip.vision.projector.scale_factor is {}, expected 1..16", f.name(), c.pool);
    c.max_soft_tokens = f.has("clip.vision.image_max_tokens") ? f.get_int("clip.vision.image_max_tokens") : 280;
    if (c.max_soft_tokens < 1 || c.max_soft_tokens > 16384)
        fail("{}: clip.vision.image_max_tokens is {}, expected 1..16384", f.name(), c.max_soft_tokens);
    c.rope_theta = 100.0f;
    if (c.head_dim() % 4)
        fail("{}: the vision head size {} is not a multiple of 4 (2D RoPE: half the head per axis, NEOX pairs)",
             f.name(), c.head_dim());
    const bool has_mean = f.has("clip.vision.image_mean"), has_std = f.has("clip.vision.image_std");
    // Gemma 4 takes pixels in [0, 1] (the tower maps them to [-1, 1]): no normalisation unless the file says.
    if (!has_mean) c.norm.mean = {0.0f, 0.0f, 0.0f};
    if (!has_std) c.norm.std = {1.0f, 1.0f, 1.0f};

    const int64_t d = c.n_embd, p = c.patch_size, hd = c.head_dim();
    std::set<std::string> known;
    auto expect = [&](const std::string& name, std::vector<int64_t> shape) {
        expect_mmproj_tensor(f, name, std::move(shape));
        known.insert(name);
    };
    auto matrix = [&](const std::string& name, std::vector<int64_t> shape) {
        expect(name, std::move(shape));
        const std::string stem = name.substr(0, name.size() - std::string_view(".weight").size());
        for (const char* s : kClampSuffixes)
            if (f.find_tensor(stem + s)) expect(stem + s, {1});
    };
    expect("v.patch_embd.weight", {p, p, 3, d});
    const auto* pos = f.find_tensor("v.position_embd.weight");
    if (!pos) fail("{}: tensor v.position_embd.weight is missing", f.name());
    if (pos->shape.size() != 3 || pos->shape[0] != d || pos->shape[2] != 2 || pos->shape[1] < 1)
        fail("{}: tensor v.position_embd.weight has shape [{}], expected [{}, positions, 2] (a column and a row table)",
             f.name(), fmt::join(pos->shape, ", "), d);
    c.pos_size = pos->shape[1];
    known.insert("v.position_embd.weight");
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string b = fmt::format("v.blk.{}.", l);
        for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) matrix(b + m + ".weight", {d, d});
        expect(b + "attn_q_norm.weight", {hd});
        expect(b + "attn_k_norm.weight", {hd});
        for (const char* n : {"ln1", "ln2", "attn_post_norm", "ffn_post_norm"}) expect(b + n + ".weight", {d});
        matrix(b + "ffn_gate.weight", {d, c.n_ff});
        matrix(b + "ffn_up.weight", {d, c.n_ff});
        matrix(b + "ffn_down.weight", {c.n_ff, d});
    }
    // Gemma4MultimodalEmbedder's projection, a plain Linear: text_dim rows of n_embd.
    matrix("mm.input_projection.weight", {d, c.text_dim});
    c.standardize = f.find_tensor("v.std_bias") || f.find_tensor("v.std_scale");
    if (c.standardize) {
        expect("v.std_bias", {d});
        expect("v.std_scale", {d});
    }
    for (const auto& t : f.tensors()) {
        if (!known.count(t.name))
            fail("{}: tensor {} is not part of the gemma4v layout (pagoda would not apply it)", f.name(), t.name);
        if (t.shape.size() <= 1 && t.type != gguf::GgmlType::F32 && t.type != gguf::GgmlType::F16 &&
            t.type != gguf::GgmlType::BF16)
            fail("{}: tensor {} is {}, expected F32, F16 or BF16", f.name(), t.name, gguf::type_traits(t.type).name);
    }
    if (pos->type != gguf::GgmlType::F32 && pos->type != gguf::GgmlType::F16 && pos->type != gguf::GgmlType::BF16)
        fail("{}: tensor v.position_embd.weight is {}, expected F32, F16 or BF16", f.name(), gguf::type_traits(pos->type).name);
    if (auto* q = f.find_tensor("v.blk.0.attn_q.weight"); q && !gguf::row_size(q->type, d))
        fail("{}: tensor v.blk.0.attn_q.weight: rows of {} values do not fit its type's blocks", f.name(), d);
}

}  // namespace pagoda::vision
