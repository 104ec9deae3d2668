// The check the Vulkan repack tests share (Vulkan builds only): every row of a block-type weight,
// repacked into the grouped layout (int8 codes + per-16 (scale, offset)), gives per element
// code * scale + offset equal to quant::dequantize_row's value, bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/weight_repack.h"
#include "quant/dequantize.h"

namespace pagoda::backend::testing {

// `label` names the type in a failure.
inline void expect_repack_equals_dequantization(const HostMatrix& m, const std::string& label) {
    const int64_t rows = m.rows, cols = m.cols;
    std::vector<int8_t> codes(static_cast<size_t>(cols));
    std::vector<float> groups(static_cast<size_t>(cols / 16) * 2), want(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        vulkan::repack_block_row(m.source(), r, codes.data(), groups.data());
        quant::dequantize_row(m.type, m.bytes.data() + size_t(r) * (m.bytes.size() / rows), want.data(), cols);
        for (int64_t c = 0; c < cols; ++c) {
            const float scale = groups[size_t(c / 16) * 2], offset = groups[size_t(c / 16) * 2 + 1];
            const float product = float(codes[size_t(c)]) * scale;
            const float got = product + offset;
            ASSERT_EQ(got, want[size_t(c)]) << label << " row " << r << " col " << c;
        }
    }
}

}  // namespace pagoda::backend::testing
