// Scalar helpers the reference backend's ops share, in double: a row softmax and the activations.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace pagoda::backend::reference {

inline void softmax_row(double* x, int64_t n) {
    const double max = *std::max_element(x, x + n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i] = std::exp(x[i] - max);
    for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

inline double silu(double g) { return g / (1 + std::exp(-g)); }

// GELU's tanh approximation.
inline double gelu_tanh(double g) {
    const double sqrt_2_over_pi = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * g * (1 + std::tanh(sqrt_2_over_pi * (g + 0.044715 * g * g * g)));
}

}  // namespace pagoda::backend::reference
