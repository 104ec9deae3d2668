// gpt-oss (GptOssForCausalLM: gpt-oss-20b / -120b) as GGUF `gpt-oss`, the way llama.cpp's converter
// (GptOssModel) hands it over: the experts' fused gate_up_proj, whose gate and up rows interleave
// (gate = even rows, up = odd rows), split into ffn_gate_exps / ffn_up_exps; MXFP4 experts
// (`*_blocks` [E, rows, blocks, 16] U8 + `*_scales` [E, rows, blocks] U8, two FP4 codes a byte in
// element order) repacked into ggml's MXFP4 blocks (the E8M0 scale, then 16 bytes holding element j
// in the low nibble and element j + 16 in the high one); the dequantised form's [E, in, out]
// matrices transposed; the sinks; YaRN; sliding_window with layer_types.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/ggml_types.h"
#include "hf/config_reader.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"

namespace pagoda::gguf {
class File;
struct TensorInfo;
}

namespace pagoda::hf {

struct SafetensorsTensor;

// The gpt-oss part of read_hf_config (experts, window, YaRN, swiglu_limit, quantization_config).
void read_gpt_oss_config(const detail::Config& c, HfModel& m);
// The inverse, for hf_config_json.
void write_gpt_oss_config(const gguf::File& f, nlohmann::json& j);

// One tensor of either side, in its own dimension order (GGUF: contiguous first; HF: row-major).
struct RawTensor {
    std::string name;
    gguf::GgmlType type;  // I8 stands for safetensors' U8
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

// The GGUF tensors of one gpt-oss expert tensor of the folder: `kind` is the rule's transform and
// `parts` its HF tensors ({blocks, scales} for the MXFP4 forms, one tensor otherwise); `gguf_name`
// is the rule's GGUF name (ffn_gate_up_exps.* for the fused ones, which come back as gate + up).
// Throws naming the tensor whose shape or dtype does not fit.
std::vector<RawTensor> gpt_oss_gguf_tensors(const HfModel& m, const std::string& gguf_name, Transform kind,
                                            const std::vector<const SafetensorsTensor*>& parts);

// The inverse, for write_hf_folder: the HF tensors of GGUF tensor `t` (a gpt-oss expert matrix or
// bias); empty when `t` is written with its partner (ffn_up_exps goes with ffn_gate_exps) or is not an
// expert tensor (then *handled is false).
std::vector<RawTensor> gpt_oss_hf_tensors(const gguf::File& f, const gguf::TensorInfo& t, bool* handled);

// The nibble order of one 32-value MXFP4 block: HF's 16 bytes <-> ggml's 16 bytes.
void mxfp4_hf_to_ggml(const uint8_t* hf, uint8_t* ggml);
void mxfp4_ggml_to_hf(const uint8_t* ggml, uint8_t* hf);

}  // namespace pagoda::hf
