// The p-quantile (0 <= p <= 1) of samples, linear between the ranks around p (n - 1); 0 when empty.
// What bench-throughput reports and what tune's served check measures, so the two agree.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace pagoda::app {

inline double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double pos = p * double(v.size() - 1);
    const size_t i = size_t(pos);
    const double f = pos - double(i);
    return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

}  // namespace pagoda::app
