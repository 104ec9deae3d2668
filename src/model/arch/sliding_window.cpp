#include "model/arch/sliding_window.h"

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::model {

std::vector<int32_t> layer_windows(const gguf::File& f, const std::string& arch, int64_t n_layers, int64_t window,
                                   int64_t default_period) {
    std::vector<int32_t> out(size_t(n_layers), 0);
    if (window <= 0) return out;
    if (window > (int64_t(1) << 30)) fail("{}: {}.attention.sliding_window = {} is out of range", f.name(), arch, window);
    const std::string key = arch + ".attention.sliding_window_pattern";
    const gguf::Value* pattern = f.find(key);
    if (pattern && pattern->as_array()) {
        const gguf::Array& items = *pattern->as_array();
        if (int64_t(items.items.size()) != n_layers)
            fail("{}: {} has {} entries for {} layers", f.name(), key, items.items.size(), n_layers);
        for (int64_t i = 0; i < n_layers; ++i) {
            const gguf::Value& v = items.items[size_t(i)];
            bool sliding = false;
            if (v.type == gguf::ValueType::boolean) sliding = std::get<bool>(v.data);
            else if (auto n = v.as_int()) sliding = *n != 0;
            else fail("{}: {} holds a {}, expected bools", f.name(), key, gguf::value_type_name(v.type));
            out[size_t(i)] = sliding ? int32_t(window) : 0;
        }
        return out;
    }
    const int64_t period = pattern ? f.get_int(key) : default_period;
    if (period < 0) fail("{}: {} = {} must not be negative", f.name(), key, period);
    for (int64_t i = 0; i < n_layers; ++i)
        out[size_t(i)] = period == 0 || i % period < period - 1 ? int32_t(window) : 0;
    return out;
}

}  // namespace pagoda::model
