// One description per architecture: the facts about a GGUF `general.architecture` that more than one
// part of pagoda needs, stated once as data. The model's config reader (RoPE pairing, biases, experts
// and their router defaults, encoder or decoder, the RoPE scalings allowed), the builder registry
// (one builder per description), gen-model (which tensors a layer gets) and the Hugging Face mapping
// (config.json classes, the bias and Q/K-norm tensor rules) all read this table, so adding an
// architecture starts with one record here.
//
// Why a folder of its own at the bottom: src/hf (below src/model) and src/model both read it, and it
// is neither a GGUF-format fact (src/gguf) nor a Hugging Face one (src/hf). It depends on nothing but
// the standard library; every layer from src/hf up may include it (cmake/layers.cmake).
//
// The tensor manifest lists a file's tensor names (a layer's without its "blk.N." prefix) with where
// each is present (Presence). A tensor not in the manifest is one the architecture's builder does not
// read; the classifier head (cls.*, model/classifier_head.h) belongs to every architecture.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::arch {

enum class Kind : uint8_t { decoder, encoder };  // encoder: an embedding model, no output head, bidirectional
enum class Rope : uint8_t { normal, neox };      // normal: pairs (2i, 2i+1); neox: pairs (i, i + n_rot/2)
enum class Has : uint8_t { no, optional, yes };  // a feature: never, where the file has it, always
// The router's scoring as llama.cpp numbers {arch}.expert_gating_func.
enum class Gating : uint8_t { softmax = 1, sigmoid = 2, softmax_selected = 3 };

// Where a tensor is present: in every layer (or file), in some (a bias a converter writes on request,
// an alternative fused form, a tied head), in every layer with a dense FFN, or in every layer with
// experts (a layer has experts where it has ffn_gate_inp.weight).
enum class Presence : uint8_t { required, optional, dense, experts };
struct TensorEntry {
    std::string_view name;  // e.g. "attn_q.weight" (in a layer) or "token_embd.weight"
    Presence presence = Presence::required;
};

// A Hugging Face config.json class that maps onto the architecture. The writer of a folder picks the
// `main` class, or the `experts` one when the model has experts and the architecture names one;
// `alias` and `multimodal` classes are read only (multimodal: the decoder's config is `text_config`).
enum class HfRole : uint8_t { main, alias, experts, multimodal };
struct HfClass {
    std::string_view name, model_type;
    HfRole role = HfRole::main;
};

struct ArchDescription {
    std::string_view name;  // general.architecture
    Kind kind = Kind::decoder;
    Rope rope = Rope::normal;
    Has qkv_bias = Has::no;   // attn_q/k/v.bias
    bool o_bias = false;      // attn_output.bias
    Has qk_norm = Has::no;    // attn_q_norm / attn_k_norm
    // no: dense; optional: experts when {arch}.expert_count > 0 (llama: Mixtral); yes: needs experts.
    Has experts = Has::no;
    // The router's defaults where the file has no {arch}.expert_gating_func / expert_weights_norm key
    // (what llama.cpp does for the architecture).
    Gating gating = Gating::softmax;
    bool expert_weights_norm = true;
    // {arch}.rope.scaling.type values beyond "none" and "linear" (which every architecture takes)
    // that the builder implements.
    std::span<const std::string_view> rope_scalings;
    std::span<const HfClass> hf_classes;  // empty: no Hugging Face folder of it is read
    std::span<const TensorEntry> tensors;        // outside the layers
    std::span<const TensorEntry> layer_tensors;  // in each "blk.N."

    // Whether the manifest names `name` ("blk.N.x" is looked up as a layer tensor).
    bool names_tensor(std::string_view name) const;
    // A layer's entry for the tensor `name` ("attn_q.bias"), or nullptr where no layer of it has one.
    const TensorEntry* layer_tensor(std::string_view name) const;
    bool has_layer_tensor(std::string_view name) const { return layer_tensor(name) != nullptr; }
    bool allows_rope_scaling(std::string_view type) const;
};

// Every architecture pagoda runs, in the order `supported` lists show them.
std::span<const ArchDescription> architectures();
// The description of `name`, or nullptr.
const ArchDescription* find_architecture(std::string_view name);
// The names, for "supported: ..." messages.
std::vector<std::string> architecture_names();
// The description whose hf_classes hold `hf_class` (with the class found), or nullptr.
const ArchDescription* find_hf_class(std::string_view hf_class, const HfClass** found = nullptr);

}  // namespace pagoda::arch
