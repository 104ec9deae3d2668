#include "quant/quantize_model.h"

#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "hf/hf_folder.h"
#include "quant/activation_scaling.h"
#include "quant/dequantize.h"
#include "quant/mix_rules.h"
#include "quant/quantize.h"

namespace pagoda::quant {

using gguf::GgmlType;

const std::vector<std::string>& quantize_target_names() {
    static const std::vector<std::string> names = {"q8_0", "q4_0", "q5_0", "q5_1", "q2_k", "q3_k", "q3_k_m",
                                                   "q4_k", "q4_k_m", "q5_k", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs",
                                                   "mxfp4", "int8", "int4-g32", "int4-g128"};
    return names;
}

namespace {

QuantTarget ggml(GgmlType t) { return QuantTarget{t, false, WeightScheme::int8_per_channel}; }
QuantTarget scheme(WeightScheme s) { return QuantTarget{GgmlType::Q8_0, true, s}; }

QuantTarget parse_target(const std::string& name) {
    if (name == "q8_0") return ggml(GgmlType::Q8_0);
    if (name == "q4_0") return ggml(GgmlType::Q4_0);
    if (name == "q5_0") return ggml(GgmlType::Q5_0);
    if (name == "q5_1") return ggml(GgmlType::Q5_1);
    if (name == "q2_k") return ggml(GgmlType::Q2_K);
    if (name == "q3_k" || name == "q3_k_m") return ggml(GgmlType::Q3_K);
    if (name == "q4_k" || name == "q4_k_m") return ggml(GgmlType::Q4_K);
    if (name == "q5_k" || name == "q5_k_m") return ggml(GgmlType::Q5_K);
    if (name == "q6_k") return ggml(GgmlType::Q6_K);
    if (name == "iq4_nl") return ggml(GgmlType::IQ4_NL);
    if (name == "iq4_xs") return ggml(GgmlType::IQ4_XS);
    if (name == "mxfp4") return ggml(GgmlType::MXFP4);
    for (const char* grid : {"iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"})
        if (name == grid)
            fail("quantisation to {} is not supported (files holding it load and compute; pagoda quantises to "
                 "iq4_nl, iq4_xs and mxfp4 of the IQ-era types)", name);
    if (auto s = scheme_from_name(name)) return scheme(*s);
    fail("unknown quantisation type '{}' (expected one of: {})", name, fmt::join(quantize_target_names(), ", "));
}

// llama.cpp's general.file_type values, so other tools label the file correctly.
uint32_t file_type_of(const std::string& target) {
    if (target == "q8_0" || target == "int8") return 7;
    if (target == "q4_0") return 2;
    if (target == "q5_0") return 8;
    if (target == "q5_1") return 9;
    if (target == "q2_k") return 10;
    if (target == "q3_k") return 11;  // Q3_K_S
    if (target == "q3_k_m") return 12;
    if (target == "int4-g32" || target == "int4-g128") return 3;  // mostly Q4_1
    if (target == "q4_k") return 14;                               // Q4_K_S
    if (target == "q4_k_m") return 15;
    if (target == "q5_k") return 16;  // Q5_K_S
    if (target == "q5_k_m") return 17;
    if (target == "q6_k") return 18;
    if (target == "iq4_nl") return 25;
    if (target == "iq4_xs") return 30;
    if (target == "mxfp4") return 38;  // llama.cpp's MXFP4_MOE
    return 0;
}

std::optional<QuantTarget> fallback(const QuantTarget& t) {
    if (t.scheme && t.weight_scheme == WeightScheme::int4_g128) return scheme(WeightScheme::int4_g32);
    if (t.scheme && t.weight_scheme == WeightScheme::int4_g32) return ggml(GgmlType::Q8_0);
    if (!t.scheme && t.type == GgmlType::Q4_K) return ggml(GgmlType::Q4_0);
    if (!t.scheme && t.type == GgmlType::Q5_K) return ggml(GgmlType::Q5_1);  // as llama-quantize
    // As llama-quantize: 2- and 3-bit K-quants fall back to Q4_0 for rows not a multiple of 256.
    if (!t.scheme && (t.type == GgmlType::Q2_K || t.type == GgmlType::Q3_K)) return ggml(GgmlType::Q4_0);
    if (!t.scheme && t.type == GgmlType::Q6_K) return ggml(GgmlType::Q8_0);
    if (!t.scheme && t.type == GgmlType::IQ4_XS) return ggml(GgmlType::IQ4_NL);  // as llama-quantize
    return std::nullopt;
}

bool is_four_bit(const std::string& target) { return target != "q8_0" && target != "int8" && target != "q6_k"; }

void row_to_f32(const gguf::TensorInfo& t, int64_t r, int64_t cols, float* out) {
    const uint64_t row_bytes = *gguf::row_size(t.type, cols);
    const uint8_t* src = t.data + uint64_t(r) * row_bytes;
    switch (t.type) {
        case GgmlType::F32: std::memcpy(out, src, size_t(cols) * 4); return;
        case GgmlType::F16:
            for (int64_t c = 0; c < cols; ++c) out[c] = f16_to_f32(reinterpret_cast<const uint16_t*>(src)[c]);
            return;
        case GgmlType::BF16:
            for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(reinterpret_cast<const uint16_t*>(src)[c]);
            return;
        default: dequantize_row(t.type, src, out, cols);
    }
}

}  // namespace

QuantizeReport quantize_model(const QuantizeRequest& req, ThreadPool& pool) {
    // A Hugging Face folder is read through its GGUF view, so `pagoda quantize DIR out.gguf` converts too.
    std::error_code ec;
    std::shared_ptr<const gguf::File> in = std::filesystem::is_directory(req.input, ec)
                                               ? hf::open_hf_folder(req.input)
                                               : std::shared_ptr<const gguf::File>(gguf::File::open(req.input));
    gguf::Writer writer;
    QuantizeReport report = quantize_into(*in, req, pool, writer);
    writer.write(req.output);
    return report;
}

std::shared_ptr<const gguf::File> quantize_loaded(std::shared_ptr<const gguf::File> in, const std::string& target,
                                                  ThreadPool& pool) {
    std::string lower = target;
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == "q4_k_s" || lower == "q3_k_s" || lower == "q5_k_s") lower.resize(4);  // llama-quantize's names
    if (lower == "mxfp4_moe") lower = "mxfp4";
    parse_target(lower);  // an unknown name fails here, before the model is read
    for (const auto& t : in->tensors())
        if (t.shape.size() >= 2 && t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
            fail("--quantize {}: {} is already quantised (tensor {} is {}); quantise an F32, F16 or BF16 model", target,
                 in->name(), t.name, gguf::type_name(uint32_t(t.type)));
    QuantizeRequest req;
    req.target = lower;
    gguf::Writer writer;
    quantize_into(*in, req, pool, writer);
    // Unchanged tensors (norms, the embedding) stay views of `in`, which the result keeps alive.
    return writer.view(in->name(), in);
}

bool target_has_clipping_search(const std::string& target) { return has_clipping_search(parse_target(target)); }

QuantizeReport quantize_into(const gguf::File& in_file, const QuantizeRequest& req, ThreadPool& pool,
                             gguf::Writer& writer) {
    const gguf::File* in = &in_file;
    const QuantTarget base_target = parse_target(req.target);
    std::optional<QuantTarget> embedding_target, output_target;
    if (!req.token_embedding_type.empty()) embedding_target = parse_target(req.token_embedding_type);
    if (!req.output_tensor_type.empty()) output_target = parse_target(req.output_tensor_type);
    const std::string arch = in->get_string_or("general.architecture", "");
    const int64_t n_layers = arch.empty() ? 0 : in->get_int_or(arch + ".block_count", 0);

    for (const auto& [key, value] : in->metadata())
        if (key != "general.file_type" && key != "general.quantization_version") writer.set(key, value);
    writer.set("general.file_type", gguf::Value::u32(file_type_of(req.target)));
    writer.set("general.quantization_version", gguf::Value::u32(2));

    QuantizeReport report;
    const std::regex layer_re(R"(blk\.(\d+)\.(.*))");
    // The type a tensor gets and why (see the rules in quantize_model.h).
    auto decide = [&](const gguf::TensorInfo& t, std::string& rule) -> std::optional<QuantTarget> {
        std::optional<QuantTarget> target;
        if (t.shape.size() < 2 || t.shape.size() > 3) {
            rule = "1-D: kept";
        } else if (t.name.ends_with(".ffn_gate_inp.weight")) {
            rule = "expert router: kept";  // as llama-quantize: top-k choices must not move
        } else if (t.name == "token_embd.weight") {
            target = embedding_target;
            rule = target ? "embedding: --token-embedding-type" : "embedding: kept";
        } else if (t.name == "output.weight") {
            target = is_four_bit(req.target) || req.target == "q6_k" ? ggml(GgmlType::Q6_K) : ggml(GgmlType::Q8_0);
            rule = "output head";
            if (output_target) {
                target = output_target;
                rule = "output head: --output-tensor-type";
            }
        } else {
            target = base_target;
            rule = "matrix";
            std::smatch m;
            if (std::regex_match(t.name, m, layer_re))
                if (auto mix = mix_layer_type(req.target, m[2], std::stoll(m[1]), n_layers)) {
                    target = ggml(mix->type);
                    rule = mix->rule;
                }
        }
        const int64_t cols = t.shape.empty() ? 0 : t.shape[0];
        bool fell_back = false;
        while (target && cols % target->row_multiple() != 0) {
            target = fallback(*target);
            fell_back = true;
        }
        if (fell_back) rule += ", row length fallback";
        if (!target && (rule == "matrix" || rule.find("fallback") != std::string::npos)) rule += ": kept";
        return target;
    };

    ScalingPlan plan;
    if (!req.importance.empty() && !req.plain) {
        plan = plan_activation_scaling(
            *in, req.importance,
            [&](const std::string& name) -> std::optional<QuantTarget> {
                const auto* t = in->find_tensor(name);
                std::string rule;
                return t ? decide(*t, rule) : std::nullopt;
            },
            [&](const std::string& name, int64_t row, float* out) {
                const auto* t = in->find_tensor(name);
                row_to_f32(*t, row, t->shape[0], out);
            },
            pool);
        report.scaling_alpha = plan.alpha;
    }

    size_t done = 0;
    for (const auto& t : in->tensors()) {
        TensorReport r;
        r.name = t.name;
        r.from_type = gguf::type_name(uint32_t(t.type));
        r.bytes_in = t.n_bytes;
        std::optional<QuantTarget> target = decide(t, r.rule);
        const int64_t cols = t.shape.empty() ? 0 : t.shape[0];
        if (target && !is_supported_block_type(t.type) && t.type != GgmlType::F32 && t.type != GgmlType::F16 &&
            t.type != GgmlType::BF16)
            fail("quantize: tensor {} has type {}, which cannot be read back for requantisation", t.name, r.from_type);
        if (auto nv = plan.new_vectors.find(t.name); nv != plan.new_vectors.end()) {
            // A norm that absorbs activation scales: written back as f32.
            r.rule += ", absorbs activation scales";
            r.to_type = "f32";
            std::vector<uint8_t> bytes(nv->second.size() * 4);
            std::memcpy(bytes.data(), nv->second.data(), bytes.size());
            r.bytes_out = bytes.size();
            writer.add_tensor(t.name, GgmlType::F32, t.shape, std::move(bytes));
        } else if (!target) {
            r.to_type = r.from_type;
            r.bytes_out = t.n_bytes;
            writer.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
        } else {
            const int64_t rows = t.n_elements() / cols;
            const GgmlType out_type = target->storage_type();
            const uint64_t out_row = *gguf::row_size(out_type, cols);
            std::vector<uint8_t> bytes(size_t(out_row * uint64_t(rows)));
            const auto it = req.importance.find(t.name);
            const std::vector<float>* col_scale = nullptr;
            const std::vector<float>* row_div = nullptr;
            if (auto cs = plan.column_scale.find(t.name); cs != plan.column_scale.end()) col_scale = &cs->second;
            if (auto rs = plan.row_scale.find(t.name); rs != plan.row_scale.end()) row_div = &rs->second;
            // In the scaled domain a column's error counts 1/s^2 as much (it is divided by s again).
            std::vector<float> imp;
            if (it != req.importance.end() && int64_t(it->second.size()) == cols) {
                imp = it->second;
                if (col_scale)
                    for (int64_t c = 0; c < cols; ++c) imp[size_t(c)] /= (*col_scale)[size_t(c)] * (*col_scale)[size_t(c)];
            }
            const float* importance = imp.empty() ? nullptr : imp.data();
            if (col_scale || row_div) r.rule += ", activation-scaled";
            std::vector<double> err_num(size_t(pool.size())), err_den(size_t(pool.size()));
            pool.parallel_for(rows, 1, [&](int64_t begin, int64_t end, int thread) {
                std::vector<float> row(static_cast<size_t>(cols)), back(static_cast<size_t>(cols));
                for (int64_t i = begin; i < end; ++i) {
                    row_to_f32(t, i, cols, row.data());
                    if (row_div)
                        for (auto& v : row) v /= (*row_div)[size_t(i)];
                    if (col_scale)
                        for (int64_t c = 0; c < cols; ++c) row[size_t(c)] *= (*col_scale)[size_t(c)];
                    uint8_t* dst = bytes.data() + uint64_t(i) * out_row;
                    if (req.plain && target->scheme) quantize_row_scheme(target->weight_scheme, row.data(), dst, cols);
                    else if (req.plain) quantize_row(target->type, row.data(), dst, cols);
                    else quantize_row_calibrated(*target, row.data(), importance, dst, cols);
                    dequantize_row(out_type, dst, back.data(), cols);
                    for (int64_t c = 0; c < cols; ++c) {
                        double w = importance ? importance[c] : 1.0, d = double(row[size_t(c)]) - back[size_t(c)];
                        err_num[size_t(thread)] += w * d * d;
                        err_den[size_t(thread)] += w * double(row[size_t(c)]) * row[size_t(c)];
                    }
                }
            });
            double num = 0, den = 0;
            for (size_t k = 0; k < err_num.size(); ++k) { num += err_num[k]; den += err_den[k]; }
            r.relative_error = den > 0 ? std::sqrt(num / den) : 0;
            r.to_type = target->name();
            r.bytes_out = bytes.size();
            writer.add_tensor(t.name, out_type, t.shape, std::move(bytes));
        }
        report.bytes_in += r.bytes_in;
        report.bytes_out += r.bytes_out;
        report.tensors.push_back(std::move(r));
        if (req.progress) req.progress(++done, in->tensors().size(), report.tensors.back());
    }
    return report;
}

}  // namespace pagoda::quant
