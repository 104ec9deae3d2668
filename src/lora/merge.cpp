#include "lora/merge.h"

#include <cstring>
#include <map>

#include "core/error.h"
#include "core/half.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace pagoda::lora {
namespace {

std::vector<float> to_floats(const gguf::TensorInfo& t) {
    const int64_t cols = t.shape[0], rows = t.n_elements() / cols;
    std::vector<float> out(size_t(t.n_elements()));
    switch (t.type) {
        case gguf::GgmlType::F32:
        case gguf::GgmlType::F16:
        case gguf::GgmlType::BF16: return read_floats(t.type, t.data, t.n_elements(), t.name);
        default: {
            const uint64_t row_bytes = *gguf::row_size(t.type, cols);
            for (int64_t r = 0; r < rows; ++r) quant::dequantize_row(t.type, t.data + r * row_bytes, out.data() + r * cols, cols);
            return out;
        }
    }
}

std::vector<uint8_t> from_floats(const gguf::TensorInfo& t, const std::vector<float>& w) {
    const int64_t cols = t.shape[0], rows = t.n_elements() / cols;
    std::vector<uint8_t> bytes(t.n_bytes);
    switch (t.type) {
        case gguf::GgmlType::F32: std::memcpy(bytes.data(), w.data(), bytes.size()); break;
        case gguf::GgmlType::F16:
            for (size_t i = 0; i < w.size(); ++i) {
                const uint16_t h = f32_to_f16(w[i]);
                std::memcpy(bytes.data() + 2 * i, &h, 2);
            }
            break;
        case gguf::GgmlType::BF16:
            for (size_t i = 0; i < w.size(); ++i) {
                const uint16_t h = f32_to_bf16(w[i]);
                std::memcpy(bytes.data() + 2 * i, &h, 2);
            }
            break;
        default: {
            if (!quant::can_quantize(t.type))
                fail("{}: type {} has no quantiser here, so the merged weight cannot be written in it", t.name,
                     gguf::type_traits(t.type).name);
            const uint64_t row_bytes = *gguf::row_size(t.type, cols);
            for (int64_t r = 0; r < rows; ++r) quant::quantize_row(t.type, w.data() + r * cols, bytes.data() + r * row_bytes, cols);
        }
    }
    return bytes;
}

}  // namespace

gguf::Writer merge_adapter(const gguf::File& base, const Adapter& adapter, float scale) {
    std::map<std::string, const LoraPair*> by_target;
    for (const auto& p : adapter.pairs) by_target[p.target] = &p;
    gguf::Writer w;
    for (const auto& [key, value] : base.metadata())
        if (key != "general.alignment") w.set(key, value);
    for (const auto& t : base.tensors()) {
        auto it = by_target.find(t.name);
        if (it == by_target.end()) {
            w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
            continue;
        }
        const LoraPair& p = *it->second;
        if (t.shape.size() != 2 || t.shape[0] != p.in || t.shape[1] != p.out)
            fail("{}: {} does not have the adapter's shape {} x {}", base.name(), t.name, p.out, p.in);
        std::vector<float> weights = to_floats(t);
        const double s = double(scale) * double(p.factor);
        std::vector<double> row(size_t(p.in));
        for (int64_t o = 0; o < p.out; ++o) {  // row o of B A, in double, then added once
            std::fill(row.begin(), row.end(), 0.0);
            for (int64_t r = 0; r < p.rank; ++r) {
                const double b = p.b[size_t(o * p.rank + r)];
                const float* a = p.a.data() + r * p.in;
                for (int64_t c = 0; c < p.in; ++c) row[size_t(c)] += b * a[c];
            }
            float* wo = weights.data() + o * p.in;
            for (int64_t c = 0; c < p.in; ++c) wo[c] = float(double(wo[c]) + s * row[size_t(c)]);
        }
        w.add_tensor(t.name, t.type, t.shape, from_floats(t, weights));
        by_target.erase(it);
    }
    if (!by_target.empty()) fail("{}: the base model has no tensor {}", base.name(), by_target.begin()->first);
    return w;
}

}  // namespace pagoda::lora
