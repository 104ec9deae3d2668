// write_hf_folder: a GGUF model as a Hugging Face folder, the inverse of open_hf_folder (used by
// `pagoda gen-model --format hf` and by tests that need folders, corrupt ones included).
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_deepseek.h"
#include "hf/hf_encoder_config.h"
#include "hf/hf_folder.h"
#include "hf/hf_gpt_oss.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"

namespace pagoda::hf {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

std::vector<float> floats_of(const gguf::File& f, const char* name) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (!t) return {};
    if (t->type != GgmlType::F32 || t->shape.size() != 1) fail("{}: tensor {} is not an F32 vector", f.name(), name);
    std::vector<float> out(size_t(t->shape[0]));
    std::memcpy(out.data(), t->data, out.size() * 4);
    return out;
}

const char* torch_dtype(GgmlType t) {
    return t == GgmlType::F32 ? "float32" : t == GgmlType::F16 ? "float16" : "bfloat16";
}

struct Entry {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> owned;
    const uint8_t* data;
    uint64_t n_bytes;
};

}  // namespace

void write_hf_folder(const gguf::File& f, const std::string& dir, int shards, const std::string& hf_class) {
    const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
    if (!embd) fail("{}: tensor token_embd.weight is missing", f.name());
    const std::string arch = f.get_string_or("general.architecture", "");
    const bool encoder = arch == "bert" || arch == "nomic-bert" || arch == "jina-bert-v2";
    if (!hf_class.empty() && !encoder) fail("{}: a Hugging Face class ({}) is chosen for encoders only", f.name(), hf_class);
    const std::string config = encoder ? hf_encoder_config_json(f, torch_dtype(embd->type), hf_class)
                                       : hf_config_json(f, torch_dtype(embd->type), floats_of(f, "rope_factors_short.weight"),
                                                        floats_of(f, "rope_factors_long.weight"));
    const HfModel m = read_hf_config(config, f.name() + " (as config.json)");
    std::vector<Entry> entries;
    for (const gguf::TensorInfo& t : f.tensors()) {
        if (t.name == "rope_factors_short.weight" || t.name == "rope_factors_long.weight" || t.name == "rope_freqs.weight")
            continue;  // in config.json (rope_freqs.weight: the llama3 scaling keys say the same)
        if (arch == "gpt-oss") {  // the experts: fused gate_up, MXFP4 as _blocks + _scales
            bool handled = false;
            for (RawTensor& r : gpt_oss_hf_tensors(f, t, &handled)) {
                Entry en{r.name, r.type, r.shape, std::move(r.bytes), nullptr, 0};
                en.data = en.owned.data();
                en.n_bytes = en.owned.size();
                entries.push_back(std::move(en));
            }
            if (handled) continue;
        }
        if (t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
            fail("{}: tensor {} is {}; a Hugging Face folder holds F32, F16 or BF16 tensors", f.name(), t.name,
                 gguf::type_name(uint32_t(t.type)));
        if (t.name.ends_with(".attn_v_b.weight")) continue;  // joined with attn_k_b below
        if (t.name.ends_with(".attn_k_b.weight")) {  // deepseek2's split kv_b: HF keeps kv_b_proj whole
            const std::string stem = t.name.substr(0, t.name.size() - std::string("k_b.weight").size());
            const gguf::TensorInfo* vb = f.find_tensor(stem + "v_b.weight");
            if (!vb || vb->type != t.type || t.shape.size() != 3 || vb->shape.size() != 3 || vb->shape[0] != t.shape[1] ||
                vb->shape[2] != t.shape[2])
                fail("{}: tensor {} has no matching {}v_b.weight [kv_lora, v, heads]", f.name(), t.name, stem);
            const int64_t nope = t.shape[0], kvl = t.shape[1], heads = t.shape[2], v = vb->shape[1];
            const uint64_t elt = t.type == GgmlType::F32 ? 4 : 2;
            Entry en{hf_source(m, stem + "kv_b.weight").hf_names[0], t.type, {heads * (nope + v), kvl}, {}, nullptr, 0};
            en.owned.resize(size_t(uint64_t(heads * (nope + v) * kvl) * elt));
            join_kv_b(t.data, vb->data, en.owned.data(), heads, nope, v, kvl, elt);
            en.data = en.owned.data();
            en.n_bytes = en.owned.size();
            entries.push_back(std::move(en));
            continue;
        }
        const HfSource src = hf_source(m, t.name);
        std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());
        if (src.flatten_to_row) shape.insert(shape.begin(), 1);
        if (src.unsqueeze) {
            if (shape.size() != 2) fail("{}: tensor {} is not [kernel, channels]", f.name(), t.name);
            shape.insert(shape.begin() + 1, 1);
        }
        if (src.hf_names.size() > 1) {  // stacked experts: the outermost GGUF dimension
            if (t.shape.size() != 3 || t.shape[2] != int64_t(src.hf_names.size()))
                fail("{}: tensor {} is not [cols, rows, {}]", f.name(), t.name, src.hf_names.size());
            const uint64_t per = t.n_bytes / src.hf_names.size();
            for (size_t e = 0; e < src.hf_names.size(); ++e)
                entries.push_back({src.hf_names[e], t.type, {t.shape[1], t.shape[0]}, {}, t.data + e * per, per});
            continue;
        }
        Entry en{src.hf_names[0], t.type, shape, {}, t.data, t.n_bytes};
        if (src.transform == Transform::plus_one) {
            if (t.type != GgmlType::F32) fail("{}: norm {} is not F32", f.name(), t.name);
            en.owned.resize(t.n_bytes);
            const float* in = reinterpret_cast<const float*>(t.data);
            float* out = reinterpret_cast<float*>(en.owned.data());
            for (uint64_t i = 0; i < t.n_bytes / 4; ++i) out[i] = in[i] - 1.0f;
        } else if (src.transform == Transform::neg_exp) {
            if (t.type != GgmlType::F32) fail("{}: tensor {} is not F32", f.name(), t.name);
            en.owned.resize(t.n_bytes);
            const float* in = reinterpret_cast<const float*>(t.data);
            float* out = reinterpret_cast<float*>(en.owned.data());
            try {
                for (uint64_t i = 0; i < t.n_bytes / 4; ++i) out[i] = a_log_of(in[i]);
            } catch (const Error& e) {
                fail("{}: tensor {}: {}", f.name(), t.name, e.what());
            }
        } else if (src.transform == Transform::permute_q || src.transform == Transform::permute_k) {
            const int64_t heads = src.transform == Transform::permute_q ? m.n_heads : m.n_kv_heads;
            const int64_t rows = t.shape.size() == 2 ? t.shape[1] : 0;
            if (rows == 0 || rows % (2 * heads)) fail("{}: tensor {} is not whole heads", f.name(), t.name);
            en.owned.resize(t.n_bytes);
            permute_rows_to_halves(t.data, en.owned.data(), heads, rows, t.n_bytes / uint64_t(rows));
        } else if (src.pad_rows > 0) {  // RoBERTa's unused rows before padding_idx + 1 (zeros, as padding_idx's is)
            if (t.shape.size() != 2) fail("{}: tensor {} is not 2-D", f.name(), t.name);
            const uint64_t row_bytes = t.n_bytes / uint64_t(t.shape[1]);
            en.owned.assign(size_t(row_bytes * uint64_t(src.pad_rows)), 0);
            en.owned.insert(en.owned.end(), t.data, t.data + t.n_bytes);
            en.shape[0] += src.pad_rows;
            en.n_bytes = en.owned.size();
        }
        if (!en.owned.empty()) en.data = en.owned.data();
        if (src.v_heads != VHeads::none && m.delta_k_heads != m.delta_v_heads) {  // tiled (GGUF) -> grouped (HF)
            std::vector<uint8_t> grouped(size_t(en.n_bytes));
            reorder_v_heads(m, src.v_heads, en.shape, t.type == GgmlType::F32 ? 4 : 2, en.data, grouped.data(), false);
            en.owned = std::move(grouped);
            en.data = en.owned.data();
        }
        entries.push_back(std::move(en));
    }
    if (shards < 1 || size_t(shards) > entries.size())
        fail("--shards {} is out of range (1 to the {} tensors of the model)", shards, entries.size());
    fs::create_directories(dir);
    // Weight files of an earlier write would be read instead of (index) or beside (shards) these.
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string n = e.path().filename().string();
        if (n == "model.safetensors" || n == "model.safetensors.index.json" ||
            (n.starts_with("model-") && n.ends_with(".safetensors") && n.find("-of-") != std::string::npos))
            fs::remove(e.path());
    }
    write_text_file((fs::path(dir) / "config.json").string(), config);
    if (encoder)
        for (const auto& [path, text] : sentence_transformers_files(f)) {
            fs::create_directories((fs::path(dir) / path).parent_path());
            write_text_file((fs::path(dir) / path).string(), text);
        }
    auto as_st = [](const Entry& e) {
        return SafetensorsEntry{e.name, e.type, e.shape, std::span<const uint8_t>(e.data, size_t(e.n_bytes))};
    };
    if (shards == 1) {
        std::vector<SafetensorsEntry> all;
        for (const Entry& e : entries) all.push_back(as_st(e));
        write_safetensors((fs::path(dir) / "model.safetensors").string(), all, {{"format", "pt"}});
        return;
    }
    nlohmann::json index;
    uint64_t total = 0;
    for (int k = 0; k < shards; ++k) {
        const std::string file = fmt::format("model-{:05}-of-{:05}.safetensors", k + 1, shards);
        std::vector<SafetensorsEntry> part;
        const size_t begin = entries.size() * size_t(k) / size_t(shards), end = entries.size() * size_t(k + 1) / size_t(shards);
        for (size_t i = begin; i < end; ++i) {
            part.push_back(as_st(entries[i]));
            index["weight_map"][entries[i].name] = file;
            total += entries[i].n_bytes;
        }
        write_safetensors((fs::path(dir) / file).string(), part, {{"format", "pt"}});
    }
    index["metadata"] = {{"total_size", total}};
    write_text_file((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(2) + "\n");
}

}  // namespace pagoda::hf
