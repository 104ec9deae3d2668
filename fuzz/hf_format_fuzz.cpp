// libFuzzer entry for the Hugging Face formats: the first byte picks the parser — even: a
// safetensors file (header length, JSON header, data section), odd: a config.json, whose model is
// then asked for the GGUF names of typical decoder and encoder tensors (and the HF names of a few
// GGUF ones), and the same text as sentence-transformers' modules.json and Pooling config. Any
// input must parse or throw pagoda::Error; a parsed safetensors file's views must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "hf/hf_config.h"
#include "hf/hf_encoder_config.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t* body = data + 1;
    const size_t n = size - 1;
    volatile uint64_t sink = 0;
    try {
        if ((data[0] & 1) == 0) {
            auto f = pagoda::hf::SafetensorsFile::parse(body, n, "fuzz.safetensors");
            for (const auto& t : f->tensors()) {
                if (t.data < body || t.data + t.n_bytes > body + n) __builtin_trap();
                if (f->find(t.name) != &t) __builtin_trap();
                for (uint64_t i = 0; i < t.n_bytes; ++i) sink = sink + t.data[i];
            }
        } else {
            const pagoda::hf::HfModel m =
                pagoda::hf::read_hf_config(std::string_view(reinterpret_cast<const char*>(body), n), "config.json");
            sink = sink + m.metadata.size();
            for (const char* name : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                                     "model.layers.0.mlp.experts.3.down_proj.weight", "lm_head.weight",
                                     "model.layers.1.block_sparse_moe.experts.0.w1.weight", "model.norm.weight",
                                     "roberta.embeddings.position_embeddings.weight", "encoder.layer.0.output.LayerNorm.gamma",
                                     "bert.pooler.dense.weight", "classifier.out_proj.bias", "embeddings.position_ids",
                                     "encoder.layers.0.attn.Wqkv.weight", "encoder.layers.1.mlp.fc12.weight", "emb_ln.bias",
                                     "model.language_model.layers.2.self_attn.k_proj.weight", "model.layers.0.layer_scalar",
                                     "model.embed_tokens_per_layer.weight", "model.vision_tower.patch_embedder.input_proj.weight"}) {
                try {
                    if (auto t = pagoda::hf::gguf_target(m, name)) sink = sink + t->gguf_name.size() + uint64_t(t->skip_rows);
                } catch (const pagoda::Error&) {
                }
            }
            for (const char* name : {"token_embd.weight", "position_embd.weight", "blk.0.attn_q.bias", "cls.output.weight",
                                     "blk.0.attn_qkv.weight", "blk.0.ffn_gate.weight", "per_layer_token_embd.weight",
                                     "blk.1.ffn_gate_up_exps.weight"}) {
                try {
                    sink = sink + pagoda::hf::hf_source(m, name).hf_names.size();
                } catch (const pagoda::Error&) {
                }
            }
        }
    } catch (const pagoda::Error&) {
    }
    if (data[0] & 1) {
        const std::string_view text(reinterpret_cast<const char*>(body), n);
        try {
            if (auto path = pagoda::hf::pooling_module_path(text, "modules.json")) sink = sink + path->size();
        } catch (const pagoda::Error&) {
        }
        try {
            sink = sink + uint64_t(pagoda::hf::pooling_type_of(text, "1_Pooling/config.json"));
        } catch (const pagoda::Error&) {
        }
    }
    return 0;
}
