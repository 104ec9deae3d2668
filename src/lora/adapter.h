// A LoRA adapter read against one base model: for each base weight it targets (named by its GGUF
// tensor name), A (rank x in) and B (out x rank) as f32, so that the adapted layer computes
//   y = W x + s * factor * B (A x),  factor = alpha / rank (rsLoRA: alpha / sqrt(rank); 1 with no alpha)
// where s is the user's scale (the adapter's default, or a request's). Two forms are read: llama.cpp's
// GGUF LoRA files and PEFT folders (adapter_config.json + adapter_model.safetensors). Every defect is
// a pagoda::Error naming the file and the tensor or key. An Adapter is immutable once loaded and is
// shared (std::shared_ptr) by the requests using it; StepModel::load_lora binds it to a model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace pagoda::lora {

struct LoraPair {
    std::string target;  // the base tensor, e.g. "blk.0.attn_q.weight"
    int64_t rank = 0, in = 0, out = 0;
    std::vector<float> a;  // rank x in, row-major
    std::vector<float> b;  // out x rank, row-major
    float factor = 1;      // alpha / rank, alpha / sqrt(rank) (rsLoRA), or 1 (no alpha given)
    int32_t slot = -1;     // the bound model's target index (set by StepModel::load_lora)
};

struct Adapter {
    std::string name;   // the model id it is served under
    std::string path;   // where it was read from (a reload reads it again)
    float scale = 1;    // the default user scale
    std::vector<LoraPair> pairs;  // sorted by target
    uint64_t content_hash = 0;    // of targets, shapes, factors and numbers: equal files, equal hash
    size_t bytes() const;         // the f32 numbers held
};

// How a backend stores an adapter's A and B for its steps (`--lora-dtype`): `exact` keeps every number
// (F16 / BF16 where every number of a pair is exactly one, else F32); `bf16` / `f16` round a pair that
// is not exactly 16-bit to that type (half the bytes of F32 to stream each step, at a 16-bit type's
// precision); a pair already exact in F16 or BF16 is kept as it is.
enum class LoraStorage { exact, bf16, f16 };
// "exact", "bf16", "f16"; anything else is refused naming `flag`.
LoraStorage parse_lora_storage(const std::string& text, const std::string& flag);

// One sequence's adapter and the scale it runs at. Empty (no adapter): the base model.
struct AdapterRef {
    std::shared_ptr<const Adapter> adapter;
    float scale = 1;
    explicit operator bool() const { return adapter != nullptr && scale != 0; }
    // The prefix cache's extra key: 0 for the base model, else a digest of the adapter's numbers and
    // the scale, so KV computed under one adapter (or scale) is never reused under another.
    uint64_t cache_key() const;
};

// llama.cpp's GGUF LoRA form: general.type "adapter", adapter.type "lora", optional
// adapter.lora.alpha, tensors "<base>.lora_a" (GGUF shape [in, rank]) and "<base>.lora_b"
// ([rank, out]) in F32, F16 or BF16. Checked against `base`: same architecture, every target a 2-D
// base tensor of matching shape.
Adapter read_gguf_adapter(const gguf::File& file, const gguf::File& base);

// The PEFT form: adapter_config.json's text (r, lora_alpha, use_rslora, target_modules,
// fan_in_fan_out and modules_to_save refused) and the safetensors file of lora_A / lora_B weights
// named after the Hugging Face modules, mapped to the base's GGUF names (Q/K rows permuted as the
// base's conversion permuted them). `config_name` is used in errors.
Adapter read_peft_adapter(const std::string& config_json, const std::string& config_name,
                          const std::string& safetensors_path, const gguf::File& base);
// The same from a buffer (fuzzer, tests).
Adapter read_peft_adapter_bytes(const std::string& config_json, const std::string& config_name, const uint8_t* data,
                                size_t size, const std::string& safetensors_name, const gguf::File& base);

// A folder is PEFT, a file is GGUF. The result has path, name and scale set from the arguments.
Adapter load_adapter(const std::string& path, const gguf::File& base, const std::string& name, float scale);

// Internal to the readers: validates a pair's shapes against the base tensor and fills in the hash.
void check_pair(const LoraPair& pair, const gguf::File& base, const std::string& file_name);
void finish_adapter(Adapter& adapter);
// n values of an F32 / F16 / BF16 tensor as f32; other types are refused naming `what`.
std::vector<float> read_floats(gguf::GgmlType type, const uint8_t* data, int64_t n, const std::string& what);

}  // namespace pagoda::lora
