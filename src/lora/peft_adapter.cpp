// PEFT LoRA folders: adapter_config.json + adapter_model.safetensors. Weights are named after the
// Hugging Face modules, e.g. base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight (lora_A:
// [r, in], lora_B: [out, r]); src/hf's name table maps the module to the base's GGUF tensor. Where
// the base's conversion permuted W's rows (llama-family Q/K), B's rows get the same permutation,
// since the update's rows are B's rows. scale = lora_alpha / r, or lora_alpha / sqrt(r) (use_rslora).
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_reader.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"
#include "lora/adapter.h"

namespace pagoda::lora {
namespace {

using Json = nlohmann::json;
namespace jr = json_reader;

struct PeftConfig {
    int64_t r = 0;
    double alpha = 0;
    bool rslora = false;
    std::set<std::string> target_modules;  // empty: any (a regex string or "all-linear")
};

PeftConfig parse_config(const std::string& text, const std::string& name) {
    Json j;
    try {
        j = Json::parse(text);
    } catch (const std::exception& e) {
        fail("{}: not valid JSON: {}", name, e.what());
    }
    PeftConfig c;
    try {
        jr::read_object(j, name);
        if (const Json* t = jr::field(j, "peft_type"); t && jr::read_string(*t, "peft_type") != "LORA")
            fail("{}: peft_type is '{}'; only LORA adapters are read", name, t->get<std::string>());
        c.r = jr::read_integer(jr::required(j, "r", "r"), "r", 1, 1 << 16);
        c.alpha = jr::read_number(jr::required(j, "lora_alpha", "lora_alpha"), "lora_alpha", 0, 1e9);
        if (const Json* v = jr::field(j, "use_rslora")) c.rslora = jr::read_bool(*v, "use_rslora");
        if (const Json* v = jr::field(j, "fan_in_fan_out"); v && jr::read_bool(*v, "fan_in_fan_out"))
            fail("{}: fan_in_fan_out is true (GPT-2 style Conv1D weights), which pagoda does not read", name);
        if (const Json* v = jr::field(j, "use_dora"); v && jr::read_bool(*v, "use_dora"))
            fail("{}: use_dora is true; DoRA adapters are not supported", name);
        if (const Json* v = jr::field(j, "modules_to_save"); v && !(v->is_array() && v->empty()))
            fail("{}: modules_to_save is set; adapters that replace whole modules are not supported", name);
        for (const char* key : {"rank_pattern", "alpha_pattern"})
            if (const Json* v = jr::field(j, key); v && !(v->is_object() && v->empty()))
                fail("{}: {} is set; per-module ranks or alphas are not supported", name, key);
        if (const Json* v = jr::field(j, "bias"); v && jr::read_string(*v, "bias") != "none")
            fail("{}: bias is '{}'; only adapters without bias terms (\"none\") are supported", name,
                 v->get<std::string>());
        if (const Json* v = jr::field(j, "target_modules"); v && v->is_array())
            for (size_t i = 0; i < v->size(); ++i)
                c.target_modules.insert(jr::read_string((*v)[i], fmt::format("target_modules[{}]", i)));
        else if (v && !v->is_string())
            jr::wrong_type("target_modules", "an array of strings or a string", *v);
    } catch (const jr::JsonFieldError& e) {
        fail("{}: {}", name, e.what());
    }
    return c;
}

hf::HfModel base_hf_model(const gguf::File& base) {
    try {
        return hf::read_hf_config(hf::hf_config_json(base, "float32", {}, {}), base.name());
    } catch (const Error& e) {
        fail("PEFT adapter names cannot be mapped onto the base model {}: {}", base.name(), e.what());
    }
}

// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" -> module
// "model.layers.3.self_attn.q_proj", which "A"/"B"; false when the name is no LoRA weight.
bool split_name(std::string name, std::string& module, char& which) {
    const std::string prefix = "base_model.model.";
    if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
    for (const char* ab : {"A", "B"}) {
        for (const std::string& suffix : {std::string(".lora_") + ab + ".weight", std::string(".lora_") + ab + ".default.weight"}) {
            if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
                module = name.substr(0, name.size() - suffix.size());
                which = ab[0];
                return true;
            }
        }
    }
    return false;
}

Adapter read_peft(const std::string& config_json, const std::string& config_name, const hf::SafetensorsFile& st,
                  const gguf::File& base) {
    const PeftConfig c = parse_config(config_json, config_name);
    const hf::HfModel hf_model = base_hf_model(base);
    const std::string& fname = st.name();
    std::map<std::string, std::pair<const hf::SafetensorsTensor*, const hf::SafetensorsTensor*>> by_module;
    for (const auto& t : st.tensors()) {
        std::string module;
        char which = 0;
        if (!split_name(t.name, module, which))
            fail("{}: tensor {} is not a lora_A / lora_B weight (embedding adapters and saved modules are not "
                 "supported)", fname, t.name);
        auto& slot = by_module[module];
        (which == 'A' ? slot.first : slot.second) = &t;
    }
    if (by_module.empty()) fail("{}: the adapter has no tensors", fname);
    Adapter adapter;
    for (const auto& [module, ab] : by_module) {
        if (!ab.first) fail("{}: {} has a lora_B but no lora_A weight", fname, module);
        if (!ab.second) fail("{}: {} has a lora_A but no lora_B weight", fname, module);
        const std::string leaf = module.substr(module.rfind('.') + 1);
        if (!c.target_modules.empty() && !c.target_modules.count(leaf) && !c.target_modules.count(module))
            fail("{}: {} is not among the config's target_modules", fname, module);
        const auto& a = *ab.first;
        const auto& b = *ab.second;
        if (a.shape.size() != 2 || b.shape.size() != 2) fail("{}: {}: lora_A and lora_B must be matrices", fname, module);
        if (a.shape[0] != b.shape[1])
            fail("{}: {}: lora_A is [{}, {}] and lora_B [{}, {}]: their ranks differ", fname, module, a.shape[0],
                 a.shape[1], b.shape[0], b.shape[1]);
        if (a.shape[0] != c.r)
            fail("{}: {}: rank {} differs from the config's r = {}", fname, module, a.shape[0], c.r);
        std::optional<hf::TensorTarget> target;
        try {
            target = hf::gguf_target(hf_model, module + ".weight");
        } catch (const Error& e) {
            fail("{}: {}: not a module of the base model: {}", fname, module, e.what());
        }
        if (!target) fail("{}: {}: the base model does not load this module", fname, module);
        if (target->expert >= 0) fail("{}: {}: adapters on MoE experts are not supported", fname, module);
        if (target->transform == hf::Transform::plus_one) fail("{}: {}: not a weight matrix", fname, module);
        LoraPair p;
        p.target = target->gguf_name;
        p.rank = a.shape[0];
        p.in = a.shape[1];
        p.out = b.shape[0];
        p.factor = float(c.rslora ? c.alpha / std::sqrt(double(p.rank)) : c.alpha / double(p.rank));
        const gguf::TensorInfo* w = base.find_tensor(p.target);
        if (!w) fail("{}: the adapter targets {} ({}), which the base model {} does not have", fname, p.target, module, base.name());
        if (w->shape.size() != 2 || w->shape[0] != p.in || w->shape[1] != p.out)
            fail("{}: {}: the adapter's update is {} x {} (out x in) but the base tensor {} is {}", fname, module,
                 p.out, p.in, p.target, w->shape.size() == 2 ? fmt::format("{} x {}", w->shape[1], w->shape[0]) : "not a matrix");
        p.a = read_floats(a.type, a.data, a.n_elements(), fname + ": " + a.name);
        p.b = read_floats(b.type, b.data, b.n_elements(), fname + ": " + b.name);
        if (target->transform == hf::Transform::permute_q || target->transform == hf::Transform::permute_k) {
            const int64_t heads = target->transform == hf::Transform::permute_q ? hf_model.n_heads : hf_model.n_kv_heads;
            if (heads <= 0 || p.out % (2 * heads) != 0)
                fail("{}: {}: {} rows do not split into {} heads", fname, module, p.out, heads);
            std::vector<float> permuted(p.b.size());
            hf::permute_rows_to_pairs(reinterpret_cast<const uint8_t*>(p.b.data()),
                                      reinterpret_cast<uint8_t*>(permuted.data()), heads, p.out,
                                      uint64_t(p.rank) * sizeof(float));
            p.b = std::move(permuted);
        }
        check_pair(p, base, fname);
        adapter.pairs.push_back(std::move(p));
    }
    finish_adapter(adapter);
    return adapter;
}

}  // namespace

Adapter read_peft_adapter(const std::string& config_json, const std::string& config_name,
                          const std::string& safetensors_path, const gguf::File& base) {
    const auto st = hf::SafetensorsFile::open(safetensors_path);
    return read_peft(config_json, config_name, *st, base);
}

Adapter read_peft_adapter_bytes(const std::string& config_json, const std::string& config_name, const uint8_t* data,
                                size_t size, const std::string& safetensors_name, const gguf::File& base) {
    const auto st = hf::SafetensorsFile::parse(data, size, safetensors_name);
    return read_peft(config_json, config_name, *st, base);
}

}  // namespace pagoda::lora
