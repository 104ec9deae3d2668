#include "hf/hf_folder.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "core/log.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_deepseek.h"
#include "hf/hf_encoder_config.h"
#include "hf/hf_gpt_oss.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors_index.h"

namespace pagoda::hf {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

struct Owned {
    std::unique_ptr<SafetensorsSet> set;
    std::vector<std::vector<uint8_t>> buffers;
};

float element_f32(GgmlType t, const uint8_t* p, int64_t i) {
    if (t == GgmlType::F32) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return t == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

uint64_t element_size(GgmlType t) { return t == GgmlType::F32 ? 4 : 2; }

struct Pending {
    TensorTarget target;
    std::vector<const SafetensorsTensor*> parts;  // one, or one per expert
};

}  // namespace

std::shared_ptr<const gguf::File> open_hf_folder(const std::string& dir) {
    const fs::path config_path = fs::path(dir) / "config.json";
    if (!fs::exists(config_path)) fail("{}: no config.json in the folder (a Hugging Face model folder needs one)", dir);
    std::ifstream in(config_path, std::ios::binary);
    if (!in) fail("cannot read {}", config_path.string());
    std::stringstream text;
    text << in.rdbuf();
    HfModel m = read_hf_config(text.str(), config_path.string());
    if (m.nextn_layers > 0)
        log_info("{}: {} NextN (multi-token prediction) block(s) in the folder are not loaded (not run)",
                 config_path.string(), m.nextn_layers);
    add_sentence_transformers_pooling(m, dir);  // encoders: sentence-transformers' modules.json

    auto owned = std::make_shared<Owned>();
    owned->set = SafetensorsSet::open(dir);
    std::vector<std::string> order;
    std::map<std::string, Pending> pending;
    int64_t other_towers = 0;  // tensors of towers (vision, audio) or heads (MTP) that are not run
    for (const SafetensorsTensor* t : owned->set->tensors()) {
        for (const std::string& p : m.skipped_prefixes) other_towers += t->name.starts_with(p) ? 1 : 0;
        std::optional<TensorTarget> target;
        try {
            target = gguf_target(m, t->name);
        } catch (const Error& e) {
            fail("{}: {}", dir, e.what());
        }
        if (!target) continue;
        auto [it, fresh] = pending.try_emplace(target->gguf_name);
        if (fresh) {
            order.push_back(target->gguf_name);
            it->second.target = *target;
            // gpt-oss's MXFP4 experts: two parts, the _blocks and the _scales
            const bool mxfp4 = target->transform == Transform::mxfp4;
            it->second.parts.assign(size_t(target->expert >= 0 ? m.n_experts : mxfp4 ? 2 : 1), nullptr);
        }
        if ((target->expert >= 0) != (it->second.target.expert >= 0) || target->transform != it->second.target.transform)
            fail("{}: tensor '{}' gives {} in two forms (per expert and stacked, or MXFP4 and unquantised)", dir, t->name,
                 target->gguf_name);
        const size_t slot = target->transform == Transform::mxfp4 ? (t->name.ends_with("_scales") ? 1 : 0)
                                                                  : size_t(std::max<int64_t>(target->expert, 0));
        if (it->second.parts[slot]) fail("{}: tensor '{}' is given twice", dir, t->name);
        it->second.parts[slot] = t;
    }
    if (other_towers > 0)
        log_info("{}: {} tensor(s) under {} (towers or heads pagoda does not run for {}) are not loaded", dir, other_towers,
                 fmt::join(m.skipped_prefixes, ", "), m.hf_arch);
    if (!m.tied && !pending.count("output.weight"))
        fail("{}: tensor {} is missing (tie_word_embeddings is false)", dir, m.head_names.front());

    std::vector<gguf::TensorInfo> tensors;
    bool all_mapped = true;
    uint64_t offset = 0;
    // A tensor pagoda made (split, repacked or computed): its bytes live in a heap buffer.
    const auto add_owned = [&](std::string name, GgmlType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
        const std::vector<uint8_t>& buf = owned->buffers.emplace_back(std::move(bytes));
        gguf::TensorInfo t;
        t.name = std::move(name);
        t.type = type;
        t.shape = std::move(shape);
        t.n_bytes = buf.size();
        t.data = buf.data();
        t.offset = offset;
        offset += t.n_bytes;
        tensors.push_back(std::move(t));
        all_mapped = false;
    };
    for (const std::string& name : order) {
        const Pending& p = pending[name];
        const Transform kind = p.target.transform;
        if (kind == Transform::mxfp4 || kind == Transform::experts_io || kind == Transform::gate_up_bias) {
            std::vector<RawTensor> made;
            try {
                made = gpt_oss_gguf_tensors(m, name, kind, p.parts);
            } catch (const Error& e) {
                fail("{}: {}", dir, e.what());
            }
            for (RawTensor& r : made) add_owned(std::move(r.name), r.type, std::move(r.shape), std::move(r.bytes));
            continue;
        }
        const SafetensorsTensor* first = p.parts[0];
        if (first && first->type == GgmlType::I8)
            fail("{}: tensor '{}' is U8, which pagoda reads only as gpt-oss's MXFP4 _blocks / _scales", dir, first->name);
        for (size_t e = 0; e < p.parts.size(); ++e) {
            if (!p.parts[e]) fail("{}: expert {} of {} is missing", dir, e, name);
            if (p.parts[e]->type != first->type || p.parts[e]->shape != first->shape)
                fail("{}: tensor '{}' differs in dtype or shape from '{}' (experts of {} must match)", dir,
                     p.parts[e]->name, first->name, name);
        }
        if (first->shape.empty() || first->shape.size() > 3 || first->n_elements() == 0)
            fail("{}: tensor '{}' has shape [{}], which is not a weight pagoda loads", dir, first->name,
                 fmt::join(first->shape, ", "));
        if (p.target.transform == Transform::split_kv_b) {  // deepseek2: attn_k_b + attn_v_b, as the converter splits it
            const int64_t heads = m.n_heads, nope = m.mla_nope, v = m.mla_v, kvl = m.mla_kv_lora;
            if (first->shape != std::vector<int64_t>{heads * (nope + v), kvl})
                fail("{}: tensor '{}' has shape [{}], expected [{}, {}] (heads x (qk_nope_head_dim + v_head_dim), kv_lora_rank)",
                     dir, first->name, fmt::join(first->shape, ", "), heads * (nope + v), kvl);
            const uint64_t elt = element_size(first->type);
            std::vector<uint8_t> k_b(size_t(uint64_t(heads * kvl * nope) * elt)), v_b(size_t(uint64_t(heads * v * kvl) * elt));
            split_kv_b(first->data, k_b.data(), v_b.data(), heads, nope, v, kvl, elt);
            const std::string stem = name.substr(0, name.size() - std::string("kv_b.weight").size());
            add_owned(stem + "k_b.weight", first->type, {nope, kvl, heads}, std::move(k_b));
            add_owned(stem + "v_b.weight", first->type, {kvl, v, heads}, std::move(v_b));
            continue;
        }
        gguf::TensorInfo t;
        t.name = name;
        t.shape.assign(first->shape.rbegin(), first->shape.rend());  // GGUF lists the contiguous dimension first
        if (p.target.flatten) {
            if (t.shape.size() != 2 || t.shape[1] != 1) fail("{}: tensor '{}' should be [1, n]", dir, first->name);
            t.shape.pop_back();
        }
        if (p.target.squeeze) {
            if (t.shape.size() != 3 || t.shape[1] != 1) fail("{}: tensor '{}' should be [channels, 1, kernel]", dir, first->name);
            t.shape.erase(t.shape.begin() + 1);
        }
        if (p.parts.size() > 1) t.shape.push_back(int64_t(p.parts.size()));
        uint64_t skip_bytes = 0;  // RoBERTa's position table: the GGUF starts padding_idx + 1 rows in
        if (p.target.skip_rows > 0) {
            if (t.shape.size() != 2 || t.shape[1] <= p.target.skip_rows)
                fail("{}: tensor '{}' has shape [{}], not more than the {} rows the position offset skips", dir, first->name,
                     fmt::join(first->shape, ", "), p.target.skip_rows);
            t.shape[1] -= p.target.skip_rows;
            skip_bytes = uint64_t(p.target.skip_rows * t.shape[0]) * element_size(first->type);
        }
        const bool to_f32 = p.target.force_f32 || t.shape.size() == 1 || p.target.transform == Transform::plus_one ||
                            p.target.transform == Transform::neg_exp;
        const bool reorder = p.target.v_heads != VHeads::none && m.delta_k_heads != m.delta_v_heads;
        t.type = to_f32 ? GgmlType::F32 : first->type;
        t.n_bytes = (uint64_t(first->n_elements()) * p.parts.size() - skip_bytes / element_size(first->type)) * element_size(t.type);
        const bool zero_copy = p.parts.size() == 1 && t.type == first->type && p.target.transform == Transform::none && !reorder;
        if (zero_copy) {
            t.data = first->data + skip_bytes;
        } else {
            if (skip_bytes) fail("{}: tensor '{}' would need a conversion and a row offset at once", dir, first->name);
            std::vector<uint8_t>& buf = owned->buffers.emplace_back(size_t(t.n_bytes));
            uint8_t* out = buf.data();
            for (const SafetensorsTensor* part : p.parts) {
                const int64_t n = part->n_elements();
                if (t.type == GgmlType::F32 && part->type != GgmlType::F32) {
                    for (int64_t i = 0; i < n; ++i) {
                        const float v = element_f32(part->type, part->data, i);
                        std::memcpy(out + 4 * i, &v, 4);
                    }
                } else {
                    std::memcpy(out, part->data, part->n_bytes);
                }
                out += uint64_t(n) * element_size(t.type);
            }
            if (p.target.transform == Transform::plus_one) {
                // Gemma's norms compute x·(1 + w); GGUF files store 1 + w (added in f32, as the converter does).
                float* f = reinterpret_cast<float*>(buf.data());
                for (uint64_t i = 0; i < t.n_bytes / 4; ++i) f[i] += 1.0f;
            } else if (p.target.transform == Transform::neg_exp) {
                float* f = reinterpret_cast<float*>(buf.data());
                for (uint64_t i = 0; i < t.n_bytes / 4; ++i) f[i] = ssm_a_of(f[i]);
            } else if (p.target.transform == Transform::permute_q || p.target.transform == Transform::permute_k) {
                const int64_t heads = p.target.transform == Transform::permute_q ? m.n_heads : m.n_kv_heads;
                const int64_t rows = first->shape[0];
                if (first->shape.size() != 2 || rows % (2 * heads) != 0)
                    fail("{}: tensor '{}' has {} rows, not whole heads of {} heads", dir, first->name, rows, heads);
                std::vector<uint8_t> permuted(buf.size());
                permute_rows_to_pairs(buf.data(), permuted.data(), heads, rows, t.n_bytes / uint64_t(rows));
                buf = std::move(permuted);
            }
            if (reorder) {  // value heads: grouped (HF) -> tiled (GGUF)
                std::vector<uint8_t> tiled(buf.size());
                try {
                    reorder_v_heads(m, p.target.v_heads, first->shape, element_size(t.type), buf.data(), tiled.data(), true);
                } catch (const Error& e) {
                    fail("{}: tensor '{}': {}", dir, first->name, e.what());
                }
                buf = std::move(tiled);
            }
            t.data = buf.data();
            all_mapped = false;
        }
        t.offset = offset;
        offset += t.n_bytes;
        tensors.push_back(std::move(t));
    }
    // Tensors config.json stands for: phi3's LongRoPE factors, gemma4's proportional-RoPE rope_freqs.
    for (const auto& [name, factors] : {std::pair{"rope_factors_short.weight", &m.rope_factors_short},
                                        std::pair{"rope_factors_long.weight", &m.rope_factors_long},
                                        std::pair{"rope_freqs.weight", &m.rope_freqs}}) {
        if (factors->empty()) continue;
        std::vector<uint8_t> bytes(factors->size() * 4);
        std::memcpy(bytes.data(), factors->data(), bytes.size());
        add_owned(name, GgmlType::F32, {int64_t(factors->size())}, std::move(bytes));
    }
    // model::open_model_file adds the keys of a tokenizer.json that is there.
    const std::string note = "the folder has no tokenizer.json";
    // The mappings count as "mapped" only when no tensor lives in a heap buffer (backends may drop
    // mapped pages after packing, which heap memory would not survive).
    return gguf::File::assemble(dir, m.metadata, std::move(tensors), owned, all_mapped && owned->set->shards().front()->is_mapped(),
                                {{"tokenizer.", note}});
}

}  // namespace pagoda::hf
