#include "model/model_identity.h"

#include <algorithm>

#include "core/checksum.h"
#include "gguf/gguf.h"

namespace pagoda::model {

uint64_t model_identity(const gguf::File& f) {
    uint64_t h = checksum64("pagoda model identity v1", 24);
    auto mix = [&h](const void* p, size_t n) { h = checksum64(p, n, h); };
    for (const auto& [key, value] : f.metadata()) {
        mix(key.data(), key.size());
        const std::string shown = value.to_display(64);  // long arrays: their head and length
        mix(shown.data(), shown.size());
    }
    for (const gguf::TensorInfo& t : f.tensors()) {
        mix(t.name.data(), t.name.size());
        const uint64_t fields[3] = {uint64_t(t.type), t.offset, t.n_bytes};
        mix(fields, sizeof fields);
        mix(t.shape.data(), t.shape.size() * sizeof(int64_t));
        if (!t.data || t.n_bytes == 0) continue;
        constexpr uint64_t kWindow = 64, kWindows = 8;
        for (uint64_t w = 0; w < kWindows; ++w) {
            const uint64_t at = t.n_bytes <= kWindow ? 0 : (t.n_bytes - kWindow) * w / (kWindows - 1);
            mix(t.data + at, size_t(std::min(kWindow, t.n_bytes - at)));
        }
    }
    return h;
}

}  // namespace pagoda::model
