#include "hf/hf_gpt_oss.h"

#include <cstring>
#include <fmt/format.h>

#include "core/error.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "hf/safetensors.h"

namespace pagoda::hf {

using detail::Config;
using gguf::GgmlType;
using gguf::Value;

namespace {

constexpr int64_t kBlock = 32, kBlockBytes = 17;  // ggml's MXFP4 block: 32 values in an E8M0 byte + 16 bytes

uint64_t float_size(GgmlType t) { return t == GgmlType::F32 ? 4 : 2; }

float read_f32(GgmlType t, const uint8_t* p) {
    if (t == GgmlType::F32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return t == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// The 4-bit code of value k (0..31) in each layout.
uint8_t hf_code(const uint8_t* b, int k) { return uint8_t((b[k / 2] >> (4 * (k % 2))) & 0xF); }
uint8_t ggml_code(const uint8_t* q, int k) { return uint8_t(k < 16 ? q[k] & 0xF : q[k - 16] >> 4); }

std::string replaced(std::string s, const std::string& from, const std::string& to) {
    return s.replace(s.find(from), from.size(), to);
}

}  // namespace

void mxfp4_hf_to_ggml(const uint8_t* hf, uint8_t* ggml) {
    for (int j = 0; j < 16; ++j) ggml[j] = uint8_t(hf_code(hf, j) | hf_code(hf, j + 16) << 4);
}

void mxfp4_ggml_to_hf(const uint8_t* ggml, uint8_t* hf) {
    for (int i = 0; i < 16; ++i) hf[i] = uint8_t(ggml_code(ggml, 2 * i) | ggml_code(ggml, 2 * i + 1) << 4);
}

void read_gpt_oss_config(const Config& c, HfModel& m) {
    const std::string a = m.arch + ".";
    auto u32 = [&](const std::string& key, int64_t v) { m.metadata.emplace_back(a + key, Value::u32(uint32_t(v))); };
    auto f32 = [&](const std::string& key, double v) { m.metadata.emplace_back(a + key, Value::f32(float(v))); };
    m.n_experts = c.positive("num_local_experts");
    u32("expert_count", m.n_experts);
    u32("expert_used_count", c.positive("num_experts_per_tok"));
    const int64_t ffn = c.positive("intermediate_size");  // the expert width (the converter writes it twice)
    u32("feed_forward_length", ffn);
    u32("expert_feed_forward_length", ffn);
    u32("attention.sliding_window", c.positive("sliding_window"));
    if (c.number_or("swiglu_limit", 7.0) != 7.0)
        c.refuse("swiglu_limit", "is not 7, the clamp pagoda's gpt-oss SwiGLU applies (as llama.cpp's)");
    if (c.has("quantization_config")) {
        const std::string method = c.object("quantization_config").string_or("quant_method", "");
        if (method != "mxfp4")
            c.refuse("quantization_config", "has quant_method '" + method + "'; gpt-oss folders are read unquantised or in MXFP4");
    }
    const Config rs = c.object("rope_scaling");
    const std::string type = rs.has("rope_type") ? rs.string_or("rope_type", "") : rs.string_or("type", "");
    if (type != "yarn") c.refuse("rope_scaling", "has type '" + type + "'; gpt-oss is trained with yarn");
    m.metadata.emplace_back(a + "rope.scaling.type", Value::string("yarn"));
    f32("rope.scaling.factor", rs.number("factor"));
    u32("rope.scaling.original_context_length", rs.positive_or("original_max_position_embeddings", 4096));
    f32("rope.scaling.yarn_beta_fast", rs.number_or("beta_fast", 32.0));
    f32("rope.scaling.yarn_beta_slow", rs.number_or("beta_slow", 1.0));
}

void write_gpt_oss_config(const gguf::File& f, nlohmann::json& j) {
    const std::string a = "gpt-oss.";
    const int64_t ffn = f.get_int(a + "expert_feed_forward_length");
    if (f.get_int(a + "feed_forward_length") != ffn)
        fail("{}: {}feed_forward_length differs from the expert width, which GptOssConfig cannot say", f.name(), a);
    if (f.get_string_or(a + "rope.scaling.type", "none") != "yarn") fail("{}: gpt-oss without YaRN has no GptOssConfig form", f.name());
    if (f.has(a + "rope.scaling.attn_factor") || f.has(a + "rope.scaling.yarn_ext_factor"))
        fail("{}: {}rope.scaling.attn_factor / yarn_ext_factor have no GptOssConfig form", f.name(), a);
    j["num_local_experts"] = f.get_int(a + "expert_count");
    j["num_experts_per_tok"] = f.get_int(a + "expert_used_count");
    j["experts_per_token"] = f.get_int(a + "expert_used_count");
    j["intermediate_size"] = ffn;
    j["sliding_window"] = f.get_int(a + "attention.sliding_window");
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", f.get_float(a + "rope.scaling.factor")},
                         {"original_max_position_embeddings", f.get_int(a + "rope.scaling.original_context_length")},
                         {"beta_fast", f.get_float_or(a + "rope.scaling.yarn_beta_fast", 32.0)},
                         {"beta_slow", f.get_float_or(a + "rope.scaling.yarn_beta_slow", 1.0)},
                         {"truncate", false}};
    j["swiglu_limit"] = 7.0;
    j["attention_bias"] = true;
    const gguf::TensorInfo* gate = f.find_tensor("blk.0.ffn_gate_exps.weight");
    if (gate && gate->type == GgmlType::MXFP4) j["quantization_config"] = {{"quant_method", "mxfp4"}};
}

std::vector<RawTensor> gpt_oss_gguf_tensors(const HfModel& m, const std::string& gguf_name, Transform kind,
                                            const std::vector<const SafetensorsTensor*>& parts) {
    const bool fused = gguf_name.find("gate_up_exps") != std::string::npos;
    std::vector<RawTensor> out;
    if (fused) {
        out.push_back({replaced(gguf_name, "gate_up_exps", "gate_exps"), GgmlType::F32, {}, {}});
        out.push_back({replaced(gguf_name, "gate_up_exps", "up_exps"), GgmlType::F32, {}, {}});
    } else {
        out.push_back({gguf_name, GgmlType::F32, {}, {}});
    }
    const int64_t n_out = int64_t(out.size()), experts = m.n_experts;
    for (const SafetensorsTensor* p : parts)
        if (!p) fail("{}: the {} of an MXFP4 expert tensor is missing (both _blocks and _scales are needed)", gguf_name,
                     parts[0] ? "_scales" : "_blocks");
    const SafetensorsTensor& w = *parts[0];
    if (kind == Transform::mxfp4) {
        const SafetensorsTensor& s = *parts[1];
        if (w.type != GgmlType::I8 || s.type != GgmlType::I8 || w.shape.size() != 4 || w.shape[3] != 16 || s.shape.size() != 3 ||
            w.shape[0] != experts || s.shape[0] != experts || s.shape[1] != w.shape[1] || s.shape[2] != w.shape[2] ||
            w.shape[1] % n_out != 0)
            fail("tensors '{}' [{}] and '{}' [{}] are not U8 MXFP4 blocks [{}, rows, blocks, 16] and scales [{}, rows, blocks]",
                 w.name, fmt::join(w.shape, ", "), s.name, fmt::join(s.shape, ", "), experts, experts);
        const int64_t rows = w.shape[1] / n_out, blocks = w.shape[2];
        for (int64_t o = 0; o < n_out; ++o) {
            RawTensor& t = out[size_t(o)];
            t.type = GgmlType::MXFP4;
            t.shape = {blocks * kBlock, rows, experts};
            t.bytes.resize(size_t(experts * rows * blocks * kBlockBytes));
            for (int64_t e = 0; e < experts; ++e)
                for (int64_t r = 0; r < rows; ++r) {
                    const int64_t src = e * w.shape[1] + (n_out == 2 ? 2 * r + o : r);  // gate: even rows, up: odd
                    for (int64_t b = 0; b < blocks; ++b) {
                        uint8_t* dst = t.bytes.data() + ((e * rows + r) * blocks + b) * kBlockBytes;
                        dst[0] = s.data[src * blocks + b];
                        mxfp4_hf_to_ggml(w.data + (src * blocks + b) * 16, dst + 1);
                    }
                }
        }
        return out;
    }
    if (w.type == GgmlType::I8) fail("tensor '{}' is U8, which is read only as MXFP4 _blocks / _scales", w.name);
    const uint64_t elt = float_size(w.type);
    if (kind == Transform::gate_up_bias) {  // [E, 2 ffn], gate and up interleaved -> two F32 [E][ffn]
        if (w.shape.size() != 2 || w.shape[0] != experts || w.shape[1] % 2)
            fail("tensor '{}' has shape [{}], expected [{}, 2 x intermediate_size]", w.name, fmt::join(w.shape, ", "), experts);
        const int64_t ffn = w.shape[1] / 2;
        for (int64_t o = 0; o < 2; ++o) {
            RawTensor& t = out[size_t(o)];
            t.shape = {ffn, experts};
            t.bytes.resize(size_t(experts * ffn * 4));
            for (int64_t e = 0; e < experts; ++e)
                for (int64_t r = 0; r < ffn; ++r) {
                    const float v = read_f32(w.type, w.data + uint64_t(e * 2 * ffn + 2 * r + o) * elt);
                    std::memcpy(t.bytes.data() + (e * ffn + r) * 4, &v, 4);
                }
        }
        return out;
    }
    // experts_io: [E, in, out] (x @ W) -> GGUF rows of `in` values, gate / up from the even / odd columns.
    if (w.shape.size() != 3 || w.shape[0] != experts || w.shape[2] % n_out)
        fail("tensor '{}' has shape [{}], expected [{}, in, out]", w.name, fmt::join(w.shape, ", "), experts);
    const int64_t in = w.shape[1], cols = w.shape[2], rows = cols / n_out;
    for (int64_t o = 0; o < n_out; ++o) {
        RawTensor& t = out[size_t(o)];
        t.type = w.type;
        t.shape = {in, rows, experts};
        t.bytes.resize(size_t(uint64_t(experts * rows * in) * elt));
        for (int64_t e = 0; e < experts; ++e)
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t i = 0; i < in; ++i)
                    std::memcpy(t.bytes.data() + uint64_t((e * rows + r) * in + i) * elt,
                                w.data + uint64_t((e * in + i) * cols + (n_out == 2 ? 2 * r + o : r)) * elt, elt);
    }
    return out;
}

std::vector<RawTensor> gpt_oss_hf_tensors(const gguf::File& f, const gguf::TensorInfo& t, bool* handled) {
    *handled = false;
    const size_t dot = t.name.find('.', 4);
    if (!t.name.starts_with("blk.") || dot == std::string::npos) return {};
    const std::string tail = t.name.substr(dot + 1);
    const std::string hf = "model.layers." + t.name.substr(4, dot - 4) + ".mlp.experts.";
    if (tail == "ffn_up_exps.weight" || tail == "ffn_up_exps.bias") {
        *handled = true;  // written with its gate partner
        return {};
    }
    const bool gate = tail == "ffn_gate_exps.weight" || tail == "ffn_gate_exps.bias";
    if (!gate && tail != "ffn_down_exps.weight") return {};
    *handled = true;
    std::vector<const gguf::TensorInfo*> src = {&t};
    if (gate) {
        const gguf::TensorInfo* up = f.find_tensor(replaced(t.name, "gate_exps", "up_exps"));
        if (!up || up->type != t.type || up->shape != t.shape) fail("{}: tensor {} has no matching ffn_up_exps partner", f.name(), t.name);
        src.push_back(up);
    }
    const int64_t n_in = int64_t(src.size());
    if (t.shape.size() != (tail.ends_with(".bias") ? 2u : 3u)) fail("{}: tensor {} is not stacked experts", f.name(), t.name);
    const int64_t cols = t.shape[0], rows = t.shape[1], experts = t.shape.back();
    if (tail.ends_with(".bias")) {  // two F32 [E][ffn] -> [E, 2 ffn] interleaved
        if (t.type != GgmlType::F32) fail("{}: tensor {} is not F32", f.name(), t.name);
        RawTensor b{hf + "gate_up_proj_bias", GgmlType::F32, {rows, 2 * cols}, std::vector<uint8_t>(size_t(rows * 2 * cols * 4))};
        for (int64_t e = 0; e < rows; ++e)
            for (int64_t r = 0; r < cols; ++r)
                for (int64_t o = 0; o < 2; ++o)
                    std::memcpy(b.bytes.data() + (e * 2 * cols + 2 * r + o) * 4, src[size_t(o)]->data + (e * cols + r) * 4, 4);
        return {b};
    }
    const std::string base = hf + (gate ? "gate_up_proj" : "down_proj");
    const int64_t out_rows = rows * n_in;
    if (t.type == GgmlType::MXFP4) {
        if (cols % kBlock) fail("{}: tensor {} rows are not whole MXFP4 blocks", f.name(), t.name);
        const int64_t blocks = cols / kBlock;
        RawTensor bl{base + "_blocks", GgmlType::I8, {experts, out_rows, blocks, 16}, std::vector<uint8_t>(size_t(experts * out_rows * blocks * 16))};
        RawTensor sc{base + "_scales", GgmlType::I8, {experts, out_rows, blocks}, std::vector<uint8_t>(size_t(experts * out_rows * blocks))};
        for (int64_t e = 0; e < experts; ++e)
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t o = 0; o < n_in; ++o) {
                    const int64_t dst = e * out_rows + r * n_in + o;
                    for (int64_t b = 0; b < blocks; ++b) {
                        const uint8_t* q = src[size_t(o)]->data + ((e * rows + r) * blocks + b) * kBlockBytes;
                        sc.bytes[size_t(dst * blocks + b)] = q[0];
                        mxfp4_ggml_to_hf(q + 1, bl.bytes.data() + (dst * blocks + b) * 16);
                    }
                }
        return {bl, sc};
    }
    if (t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
        fail("{}: tensor {} is {}; gpt-oss experts are written as F32, F16, BF16 or MXFP4", f.name(), t.name,
             gguf::type_name(uint32_t(t.type)));
    const uint64_t elt = float_size(t.type);
    RawTensor w{base, t.type, {experts, cols, out_rows}, std::vector<uint8_t>(size_t(uint64_t(experts * cols * out_rows) * elt))};
    for (int64_t e = 0; e < experts; ++e)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t o = 0; o < n_in; ++o)
                for (int64_t i = 0; i < cols; ++i)
                    std::memcpy(w.bytes.data() + uint64_t((e * cols + i) * out_rows + r * n_in + o) * elt,
                                src[size_t(o)]->data + uint64_t((e * rows + r) * cols + i) * elt, elt);
    return {w};
}

}  // namespace pagoda::hf
