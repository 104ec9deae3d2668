#include "model/arch/rope_frequencies.h"

#include <algorithm>
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

backend::RopeSpec yarn_rope_spec(int64_t dims, bool neox, double theta, const YarnRopeScaling& y) {
    const auto corr_dim = [&](double beta) {
        return double(dims) * std::log(double(y.original_context) / (beta * 2 * std::numbers::pi)) / (2 * std::log(theta));
    };
    const double low = std::max(0.0, std::floor(corr_dim(y.beta_fast)));
    const double high = std::min(double(dims - 1), std::ceil(corr_dim(y.beta_slow)));
    backend::RopeSpec spec;
    spec.dims = dims;
    spec.neox = neox;
    for (int64_t i = 0; i < dims / 2; ++i) {
        const double ramp = 1 - std::clamp((double(i) - low) / std::max(0.001, high - low), 0.0, 1.0);
        const double mix = ramp * y.ext_factor;
        spec.inv_freq.push_back(std::pow(theta, -2.0 * double(i) / double(dims)) * ((1 - mix) / y.factor + mix));
    }
    return spec;
}

double yarn_mscale(const YarnRopeScaling& y) {
    return y.ext_factor != 0 ? y.attn_factor * (1 + 0.1 * std::log(y.factor)) : y.attn_factor;
}

YarnRopeScaling read_yarn_rope_scaling(const gguf::File& f, const std::string& arch, int64_t context_length,
                                       bool log_multiplier_read) {
    const std::string a = arch + ".rope.scaling.";
    YarnRopeScaling y;
    y.factor = f.get_float_or(a + "factor", y.factor);
    y.original_context = f.get_int_or(a + "original_context_length", context_length);
    y.beta_fast = f.get_float_or(a + "yarn_beta_fast", y.beta_fast);
    y.beta_slow = f.get_float_or(a + "yarn_beta_slow", y.beta_slow);
    y.ext_factor = f.get_float_or(a + "yarn_ext_factor", y.ext_factor);
    y.attn_factor = f.get_float_or(a + "attn_factor", y.attn_factor);
    if (!(y.factor >= 1) || !std::isfinite(y.factor)) fail("{}: {}factor = {} must be at least 1", f.name(), a, y.factor);
    if (y.original_context <= 0) fail("{}: {}original_context_length = {} must be positive", f.name(), a, y.original_context);
    if (!(y.beta_fast > 0) || !(y.beta_slow > 0) || !std::isfinite(y.beta_fast) || !std::isfinite(y.beta_slow))
        fail("{}: {}yarn_beta_fast = {} and yarn_beta_slow = {} must be positive", f.name(), a, y.beta_fast, y.beta_slow);
    if (!(y.ext_factor >= 0 && y.ext_factor <= 1)) fail("{}: {}yarn_ext_factor = {} must be in 0..1", f.name(), a, y.ext_factor);
    if (!(y.attn_factor > 0) || !std::isfinite(y.attn_factor))
        fail("{}: {}attn_factor = {} must be positive", f.name(), a, y.attn_factor);
    if (!log_multiplier_read && f.get_float_or(a + "yarn_log_multiplier", 0.0) != 0.0)
        fail("{}: {}yarn_log_multiplier is not supported yet (YaRN with a separate mscale for all dimensions)", f.name(), a);
    if (f.get_float_or(a + "yarn_attn_factor", 1.0) != 1.0)
        fail("{}: {}yarn_attn_factor is not supported yet (only {}attn_factor)", f.name(), a, a);
    return y;
}

}  // namespace pagoda::model
