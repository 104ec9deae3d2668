#include "lora/random_adapter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/half.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"

namespace pagoda::lora {
namespace {

std::vector<uint8_t> encode(const std::vector<float>& v, gguf::GgmlType type) {
    std::vector<uint8_t> out;
    if (type == gguf::GgmlType::F32) {
        out.resize(v.size() * 4);
        std::memcpy(out.data(), v.data(), out.size());
        return out;
    }
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = type == gguf::GgmlType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
    }
    return out;
}

struct Pair {
    std::string target, module;  // GGUF tensor; HF module ("model.layers.0.self_attn.q_proj")
    int64_t in, out;
    std::vector<uint8_t> a, b, b_hf;  // b_hf: B's rows in the HF order (Q/K un-permuted)
};

}  // namespace

int64_t write_random_adapter(const gguf::File& base, const RandomAdapterSpec& spec, const std::string& gguf_path,
                             const std::string& peft_dir) {
    if (spec.rank <= 0) fail("random adapter: the rank must be positive, got {}", spec.rank);
    if (spec.type != gguf::GgmlType::F32 && spec.type != gguf::GgmlType::F16 && spec.type != gguf::GgmlType::BF16)
        fail("random adapter: LoRA weights are F32, F16 or BF16");
    const std::string arch = base.get_string("general.architecture");
    hf::HfModel hf_model;
    if (!peft_dir.empty()) hf_model = hf::read_hf_config(hf::hf_config_json(base, "float32", {}, {}), base.name());
    std::mt19937_64 rng(spec.seed);
    std::vector<Pair> pairs;
    std::vector<std::string> leaves;
    for (const auto& t : base.tensors()) {
        if (t.shape.size() != 2 || t.name.rfind("blk.", 0) != 0) continue;
        if (t.name.size() < 7 || t.name.substr(t.name.size() - 7) != ".weight") continue;
        const size_t dot = t.name.find('.', 4);
        if (dot == std::string::npos || dot + 1 >= t.name.size() - 7) continue;
        const std::string module = t.name.substr(dot + 1, t.name.size() - 7 - dot - 1);
        if (std::find(spec.modules.begin(), spec.modules.end(), module) == spec.modules.end()) continue;
        Pair p{t.name, "", t.shape[0], t.shape[1], {}, {}, {}};
        if (spec.rank > std::min(p.in, p.out)) fail("random adapter: rank {} exceeds {}'s size", spec.rank, t.name);
        std::normal_distribution<float> da(0.0f, 1.0f / std::sqrt(float(p.in)));
        std::normal_distribution<float> db(0.0f, spec.b_std / std::sqrt(float(spec.rank)));
        std::vector<float> a(size_t(spec.rank * p.in)), b(size_t(p.out * spec.rank));
        for (auto& v : a) v = da(rng);
        for (auto& v : b) v = db(rng);
        p.a = encode(a, spec.type);
        p.b = encode(b, spec.type);
        if (!peft_dir.empty()) {
            const hf::HfSource src = hf::hf_source(hf_model, t.name);
            if (src.hf_names.size() != 1) fail("random adapter: {} has no single Hugging Face module", t.name);
            const std::string& hf_name = src.hf_names[0];
            p.module = hf_name.substr(0, hf_name.size() - std::string(".weight").size());
            leaves.push_back(p.module.substr(p.module.rfind('.') + 1));
            p.b_hf = p.b;
            if (src.transform == hf::Transform::permute_q || src.transform == hf::Transform::permute_k) {
                const int64_t heads = src.transform == hf::Transform::permute_q ? hf_model.n_heads : hf_model.n_kv_heads;
                const uint64_t row_bytes = p.b.size() / uint64_t(p.out);
                hf::permute_rows_to_halves(p.b.data(), p.b_hf.data(), heads, p.out, row_bytes);
            }
        }
        pairs.push_back(std::move(p));
    }
    if (pairs.empty()) fail("random adapter: {} has none of the targeted modules", base.name());
    if (!gguf_path.empty()) {
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::string(arch));
        w.set("general.type", gguf::Value::string("adapter"));
        w.set("general.name", gguf::Value::string("random-lora"));
        w.set("adapter.type", gguf::Value::string("lora"));
        const double alpha = spec.rslora ? spec.alpha * std::sqrt(double(spec.rank)) : spec.alpha;
        w.set("adapter.lora.alpha", gguf::Value::f32(float(alpha)));
        for (const auto& p : pairs) {
            w.add_tensor(p.target + ".lora_a", spec.type, {p.in, spec.rank}, p.a.data(), p.a.size());
            w.add_tensor(p.target + ".lora_b", spec.type, {spec.rank, p.out}, p.b.data(), p.b.size());
        }
        w.write(gguf_path);
    }
    if (!peft_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(peft_dir, ec);
        if (ec) fail("cannot create {}: {}", peft_dir, ec.message());
        std::vector<hf::SafetensorsEntry> entries;
        for (const auto& p : pairs) {
            const std::string name = "base_model.model." + p.module;
            entries.push_back({name + ".lora_A.weight", spec.type, {spec.rank, p.in}, p.a});
            entries.push_back({name + ".lora_B.weight", spec.type, {p.out, spec.rank}, p.b_hf});
        }
        hf::write_safetensors((std::filesystem::path(peft_dir) / "adapter_model.safetensors").string(), entries);
        std::sort(leaves.begin(), leaves.end());
        leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
        nlohmann::ordered_json config = {{"peft_type", "LORA"}, {"r", spec.rank}, {"lora_alpha", spec.alpha},
                                         {"use_rslora", spec.rslora}, {"target_modules", leaves},
                                         {"fan_in_fan_out", false}, {"bias", "none"}, {"modules_to_save", nullptr},
                                         {"task_type", "CAUSAL_LM"}};
        hf::write_text_file((std::filesystem::path(peft_dir) / "adapter_config.json").string(), config.dump(2) + "\n");
    }
    return int64_t(pairs.size());
}

}  // namespace pagoda::lora
