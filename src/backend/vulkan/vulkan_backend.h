// The Vulkan compute backend ("vulkan"): weights, the activation arena and the paged KV cache in
// device memory, every op a compute shader (shaders/), a step's dispatches recorded into one command
// buffer and submitted when a result is read (or the next step begins). Activations are f32; a
// Tensor's data pointer is a device address into the arena (never dereferenced on the host).
//
// Computes: embed, matmul (F32, F16, BF16 and every GGML block type read from the file's own blocks,
// via weight_repack.h; a GEMV for up to 8 tokens, a shared-memory tiled GEMM above, the same
// per-output sum in both, their sizes specialisation constants: kernel_settings.h), rms_norm, add,
// add_bias, rope (both pairings), silu_mul, gelu_mul, softmax, scale, softcap, attn_temperature, kv_write and paged
// attention over f32/f16/bf16/q8 caches (causal, GQA, sliding window, soft cap), the row gathers, and
// the mixture-of-experts FFN routed on the device (vulkan_moe.h). memory_bytes() is the device's free
// memory (vk_context.h). Fused ops: add_rms_norm, matmul_silu_mul and qkv_rope_kv_write, the latter
// two with LoRA parts (fuses_lora), each bitwise its unfused sequence. Refuses, naming what is
// missing: the quantising norms (not declared), heads wider than 256 or (f16/bf16 caches) of odd size.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace pagoda::backend {

// Throws pagoda::Error naming what is missing (the loader, a device, a feature).
std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& options);

}  // namespace pagoda::backend
