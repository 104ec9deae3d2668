// llama.cpp's GGUF LoRA files (convert_lora_to_gguf.py writes them): general.type "adapter",
// adapter.type "lora", adapter.lora.alpha, and per targeted base tensor W a pair W.lora_a, of GGUF
// shape [in, rank] (PEFT's lora_A as stored), and W.lora_b, [rank, out]. scale = alpha / rank, or 1
// when alpha is 0 or absent — llama.cpp's rule.
#include <cmath>
#include <map>

#include "core/error.h"
#include "lora/adapter.h"

namespace pagoda::lora {
namespace {

constexpr std::string_view kSuffixA = ".lora_a", kSuffixB = ".lora_b";

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Adapter read_gguf_adapter(const gguf::File& file, const gguf::File& base) {
    const std::string& fname = file.name();
    const std::string type = file.get_string_or("general.type", "");
    if (type != "adapter")
        fail("{}: general.type is '{}', not 'adapter': this is not a LoRA adapter file", fname, type);
    const std::string adapter_type = file.get_string_or("adapter.type", "");
    if (adapter_type != "lora")
        fail("{}: adapter.type is '{}'; only 'lora' adapters are read", fname, adapter_type);
    const std::string arch = file.get_string_or("general.architecture", "");
    const std::string base_arch = base.get_string_or("general.architecture", "");
    if (arch != base_arch)
        fail("{}: the adapter is for architecture '{}' but the base model {} is '{}'", fname, arch, base.name(), base_arch);
    const double alpha = file.get_float_or("adapter.lora.alpha", 0.0);
    if (!std::isfinite(alpha) || alpha < 0) fail("{}: adapter.lora.alpha is {}, not a finite value >= 0", fname, alpha);

    std::map<std::string, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> by_target;
    for (const auto& t : file.tensors()) {
        const bool is_a = ends_with(t.name, kSuffixA), is_b = ends_with(t.name, kSuffixB);
        if (!is_a && !is_b)
            fail("{}: tensor {} is neither a .lora_a nor a .lora_b tensor", fname, t.name);
        auto& slot = by_target[t.name.substr(0, t.name.size() - kSuffixA.size())];
        (is_a ? slot.first : slot.second) = &t;
    }
    if (by_target.empty()) fail("{}: the adapter has no tensors", fname);
    Adapter adapter;
    for (const auto& [target, ab] : by_target) {
        if (!ab.first) fail("{}: {}.lora_b has no {}.lora_a", fname, target, target);
        if (!ab.second) fail("{}: {}.lora_a has no {}.lora_b", fname, target, target);
        const gguf::TensorInfo& a = *ab.first;
        const gguf::TensorInfo& b = *ab.second;
        if (a.shape.size() != 2 || b.shape.size() != 2)
            fail("{}: {}: lora_a and lora_b must be matrices", fname, target);
        if (a.shape[1] != b.shape[0])
            fail("{}: {}: lora_a is [{}, {}] and lora_b [{}, {}]: their ranks differ (is lora_a transposed?)", fname,
                 target, a.shape[0], a.shape[1], b.shape[0], b.shape[1]);
        LoraPair p;
        p.target = target;
        p.in = a.shape[0];
        p.rank = a.shape[1];
        p.out = b.shape[1];
        p.factor = alpha > 0 ? float(alpha / double(p.rank)) : 1.0f;
        // Shapes first: the base's sizes bound the conversion below.
        const gguf::TensorInfo* w = base.find_tensor(target);
        if (w && w->shape.size() == 2 && (w->shape[0] != p.in || w->shape[1] != p.out))
            fail("{}: {}: the adapter's update is {} x {} (out x in) but the base tensor is {} x {}", fname, target,
                 p.out, p.in, w->shape[1], w->shape[0]);
        if (!w) fail("{}: the adapter targets {}, which the base model {} does not have", fname, target, base.name());
        p.a = read_floats(a.type, a.data, a.n_elements(), fname + ": " + a.name);
        p.b = read_floats(b.type, b.data, b.n_elements(), fname + ": " + b.name);
        check_pair(p, base, fname);
        adapter.pairs.push_back(std::move(p));
    }
    finish_adapter(adapter);
    return adapter;
}

}  // namespace pagoda::lora
