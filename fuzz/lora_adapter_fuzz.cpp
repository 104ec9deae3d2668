// libFuzzer entry for the LoRA adapter readers (lora/adapter.h), against a fixed small llama base
// (2 layers, dim 16, 4 heads, 2 KV heads, FFN 24) built in memory: the first byte picks the form —
// even: the rest is a GGUF LoRA file; odd: a PEFT adapter, adapter_config.json's text up to the first
// NUL byte and adapter_model.safetensors after it. Any input must load or throw pagoda::Error, and a
// loaded adapter's pairs must match the base's shapes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "lora/adapter.h"

namespace {

const pagoda::gguf::File& base() {
    static const std::unique_ptr<pagoda::gguf::File> file = [] {
        using pagoda::gguf::Value;
        static pagoda::gguf::Writer w;
        w.set("general.architecture", Value::string("llama"));
        w.set("llama.block_count", Value::u32(2));
        w.set("llama.embedding_length", Value::u32(16));
        w.set("llama.attention.head_count", Value::u32(4));
        w.set("llama.attention.head_count_kv", Value::u32(2));
        w.set("llama.feed_forward_length", Value::u32(24));
        w.set("llama.context_length", Value::u32(64));
        static std::vector<float> zeros(16 * 24, 0.0f);
        auto add = [&](const std::string& name, int64_t cols, int64_t rows) {
            w.add_tensor(name, pagoda::gguf::GgmlType::F32, {cols, rows}, zeros.data(), uint64_t(cols * rows) * 4);
        };
        for (int l = 0; l < 2; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            add(p + "attn_q.weight", 16, 16);
            add(p + "attn_k.weight", 16, 8);
            add(p + "attn_v.weight", 16, 8);
            add(p + "attn_output.weight", 16, 16);
            add(p + "ffn_gate.weight", 16, 24);
            add(p + "ffn_up.weight", 16, 24);
            add(p + "ffn_down.weight", 24, 16);
        }
        return w.view("fuzz-base.gguf");
    }();
    return *file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t* body = data + 1;
    const size_t n = size - 1;
    try {
        pagoda::lora::Adapter a;
        if ((data[0] & 1) == 0) {
            auto f = pagoda::gguf::File::parse(body, n, "fuzz-lora.gguf");
            a = pagoda::lora::read_gguf_adapter(*f, base());
        } else {
            const void* nul = std::memchr(body, 0, n);
            const size_t config_size = nul ? size_t(static_cast<const uint8_t*>(nul) - body) : n;
            const std::string config(reinterpret_cast<const char*>(body), config_size);
            const size_t rest = nul ? n - config_size - 1 : 0;
            a = pagoda::lora::read_peft_adapter_bytes(config, "adapter_config.json", body + config_size + (nul ? 1 : 0), rest,
                                                      "adapter_model.safetensors", base());
        }
        for (const auto& p : a.pairs) {
            const auto* t = base().find_tensor(p.target);
            if (!t || t->shape[0] != p.in || t->shape[1] != p.out) __builtin_trap();
            if (int64_t(p.a.size()) != p.rank * p.in || int64_t(p.b.size()) != p.out * p.rank) __builtin_trap();
        }
    } catch (const pagoda::Error&) {
    }
    return 0;
}
