#include "model/arch/rope_frequencies.h"

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::model {

backend::RopeSpec make_rope_spec(int64_t dims, bool neox, double theta, double linear_scale,
                                 const std::vector<float>& factors) {
    backend::RopeSpec spec;
    spec.dims = dims;
    spec.neox = neox;
    // Frequencies in double: positions up to 10^5 times a frequency must keep their fraction.
    for (int64_t i = 0; i < dims / 2; ++i) {
        double inv = std::pow(theta, -2.0 * double(i) / double(dims));
        if (!factors.empty()) inv /= double(factors[size_t(i)]);
        spec.inv_freq.push_back(inv / linear_scale);
    }
    return spec;
}

std::vector<float> llama3_rope_factors(const Llama3RopeScaling& s, double theta, int64_t dims) {
    const double low_wavelength = double(s.original_context) / s.low_freq_factor;
    const double high_wavelength = double(s.original_context) / s.high_freq_factor;
    std::vector<float> out;
    for (int64_t i = 0; i < dims / 2; ++i) {
        const double freq = std::pow(theta, -2.0 * double(i) / double(dims));
        const double wavelength = 2 * std::numbers::pi / freq;
        double divisor = 1.0;
        if (wavelength > low_wavelength) {
            divisor = s.factor;
        } else if (wavelength >= high_wavelength) {
            const double smooth = (double(s.original_context) / wavelength - s.low_freq_factor) /
                                  (s.high_freq_factor - s.low_freq_factor);
            divisor = 1.0 / ((1 - smooth) / s.factor + smooth);
        }
        out.push_back(float(divisor));
    }
    return out;
}

Llama3RopeScaling read_llama3_rope_scaling(const gguf::File& f, const std::string& arch) {
    const std::string a = arch + ".rope.scaling.";
    Llama3RopeScaling s;
    s.factor = f.get_float_or(a + "factor", s.factor);
    s.low_freq_factor = f.get_float_or(a + "low_freq_factor", s.low_freq_factor);
    s.high_freq_factor = f.get_float_or(a + "high_freq_factor", s.high_freq_factor);
    s.original_context = f.get_int_or(a + "original_context_length", s.original_context);
    if (!(s.factor >= 1)) fail("{}: {}factor = {} must be at least 1", f.name(), a, s.factor);
    if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor))
        fail("{}: {}low_freq_factor = {} and high_freq_factor = {} must satisfy 0 < low < high", f.name(), a,
             s.low_freq_factor, s.high_freq_factor);
    if (s.original_context <= 0) fail("{}: {}original_context_length = {} must be positive", f.name(), a, s.original_context);
    return s;
}

}  // namespace pagoda::model
