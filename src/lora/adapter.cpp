#include "lora/adapter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/checksum.h"
#include "core/error.h"
#include "core/half.h"

namespace pagoda::lora {

LoraStorage parse_lora_storage(const std::string& text, const std::string& flag) {
    if (text == "exact") return LoraStorage::exact;
    if (text == "bf16") return LoraStorage::bf16;
    if (text == "f16") return LoraStorage::f16;
    fail("{}: '{}' is not a LoRA storage type (exact, bf16 or f16)", flag, text);
}

size_t Adapter::bytes() const {
    size_t n = 0;
    for (const auto& p : pairs) n += (p.a.size() + p.b.size()) * sizeof(float);
    return n;
}

uint64_t AdapterRef::cache_key() const {
    if (!*this) return 0;
    uint32_t bits = 0;
    std::memcpy(&bits, &scale, sizeof bits);
    const uint64_t key = checksum64(&bits, sizeof bits, adapter->content_hash);
    return key ? key : 1;  // 0 is the base model's
}

std::vector<float> read_floats(gguf::GgmlType type, const uint8_t* data, int64_t n, const std::string& what) {
    std::vector<float> out(size_t(std::max<int64_t>(0, n)));
    switch (type) {
        case gguf::GgmlType::F32: std::memcpy(out.data(), data, out.size() * 4); break;
        case gguf::GgmlType::F16:
            for (size_t i = 0; i < out.size(); ++i) {
                uint16_t h;
                std::memcpy(&h, data + 2 * i, 2);
                out[i] = f16_to_f32(h);
            }
            break;
        case gguf::GgmlType::BF16:
            for (size_t i = 0; i < out.size(); ++i) {
                uint16_t h;
                std::memcpy(&h, data + 2 * i, 2);
                out[i] = bf16_to_f32(h);
            }
            break;
        default:
            fail("{} is of type {}; LoRA weights must be F32, F16 or BF16", what, gguf::type_traits(type).name);
    }
    return out;
}

void check_pair(const LoraPair& p, const gguf::File& base, const std::string& file_name) {
    const gguf::TensorInfo* t = base.find_tensor(p.target);
    if (!t) fail("{}: the adapter targets {}, which the base model {} does not have", file_name, p.target, base.name());
    if (t->shape.size() != 2)
        fail("{}: the adapter targets {}, which is not a matrix in the base model", file_name, p.target);
    const int64_t in = t->shape[0], out = t->shape[1];
    if (p.in != in || p.out != out)
        fail("{}: {}: the adapter's update is {} x {} (out x in) but the base tensor is {} x {}", file_name, p.target,
             p.out, p.in, out, in);
    if (p.rank <= 0 || p.rank > std::min(in, out))
        fail("{}: {}: rank {} is outside 1..{}", file_name, p.target, p.rank, std::min(in, out));
    if (int64_t(p.a.size()) != p.rank * p.in || int64_t(p.b.size()) != p.out * p.rank)
        fail("{}: {}: lora_a / lora_b hold the wrong number of values", file_name, p.target);
    for (float v : p.a)
        if (!std::isfinite(v)) fail("{}: {}: lora_a holds a non-finite value", file_name, p.target);
    for (float v : p.b)
        if (!std::isfinite(v)) fail("{}: {}: lora_b holds a non-finite value", file_name, p.target);
}

void finish_adapter(Adapter& adapter) {
    std::sort(adapter.pairs.begin(), adapter.pairs.end(),
              [](const LoraPair& x, const LoraPair& y) { return x.target < y.target; });
    uint64_t h = 0x4c6f5241ull;  // "LoRA"
    for (const auto& p : adapter.pairs) {
        h = checksum64(p.target.data(), p.target.size(), h);
        const int64_t dims[3] = {p.rank, p.in, p.out};
        h = checksum64(dims, sizeof dims, h);
        h = checksum64(&p.factor, sizeof p.factor, h);
        h = checksum64(p.a.data(), p.a.size() * sizeof(float), h);
        h = checksum64(p.b.data(), p.b.size() * sizeof(float), h);
    }
    adapter.content_hash = h;
}

Adapter load_adapter(const std::string& path, const gguf::File& base, const std::string& name, float scale) {
    namespace fs = std::filesystem;
    std::error_code ec;
    Adapter a;
    if (fs::is_directory(path, ec)) {
        const std::string config = (fs::path(path) / "adapter_config.json").string();
        const std::string weights = (fs::path(path) / "adapter_model.safetensors").string();
        if (!fs::exists(config, ec)) fail("LoRA folder {} has no adapter_config.json", path);
        if (!fs::exists(weights, ec))
            fail("LoRA folder {} has no adapter_model.safetensors (adapter_model.bin is not read)", path);
        std::string text;
        {
            std::FILE* f = std::fopen(config.c_str(), "rb");
            if (!f) fail("cannot open {}", config);
            char buf[4096];
            for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
                text.append(buf, n);
                if (text.size() > (16u << 20)) {
                    std::fclose(f);
                    fail("{} is larger than 16 MiB", config);
                }
            }
            std::fclose(f);
        }
        a = read_peft_adapter(text, config, weights, base);
    } else {
        if (!fs::exists(path, ec)) fail("LoRA adapter {} does not exist", path);
        const auto file = gguf::File::open(path);
        a = read_gguf_adapter(*file, base);
    }
    if (!std::isfinite(scale)) fail("LoRA adapter {}: the scale must be a finite number", path);
    a.path = path;
    a.name = name;
    a.scale = scale;
    return a;
}

}  // namespace pagoda::lora
