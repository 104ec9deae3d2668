// The backend conformance suite (conformance.h): copy_columns (backend::ColumnCopy, MLA's key
// assembly and output compaction) against the contract's formula computed here on host floats, on the
// backend under test and on the reference: exact copies, dst's other columns untouched, a range
// repeated into every head (src stride 0), heads compacted and spread; and the shape errors. A backend
// that declares no copy_columns (supports) is skipped naming it; the model layer refuses deepseek2 there.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using namespace testing;

// dst after the copy, by the contract's formula.
std::vector<float> expected_copy(const std::vector<float>& src, int64_t src_cols, std::vector<float> dst,
                                 int64_t dst_cols, int64_t rows, const ColumnCopy& c) {
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t j = 0; j < c.width; ++j)
                dst[size_t(t * dst_cols + h * c.dst_stride + c.dst_offset + j)] =
                    src[size_t(t * src_cols + h * c.src_stride + c.src_offset + j)];
    return dst;
}

TEST_P(Conformance, CopyColumnsIsTheContractsExactCopy) {
    if (!test->supports(OpKind::copy_columns)) GTEST_SKIP() << GetParam() << ": declares no copy_columns";
    std::mt19937 rng(47);
    for (int trial = 0; trial < 24; ++trial) {
        const int64_t rows = uniform(1, 37, rng);
        ColumnCopy c;
        c.n_heads = uniform(1, 6, rng);
        c.width = uniform(1, 40, rng);
        const int kind = trial % 3;  // 0: broadcast one range, 1: compact heads, 2: spread into wider heads
        c.src_stride = kind == 0 ? 0 : c.width + uniform(0, 9, rng);
        c.src_offset = uniform(0, 5, rng);
        c.dst_stride = kind == 1 ? c.width : c.width + uniform(0, 9, rng);
        c.dst_offset = kind == 1 ? 0 : uniform(0, int32_t(c.dst_stride - c.width), rng);
        const int64_t src_cols = (c.n_heads - 1) * c.src_stride + c.src_offset + c.width + uniform(0, 3, rng);
        const int64_t dst_cols = (c.n_heads - 1) * c.dst_stride + c.dst_offset + c.width + uniform(0, 3, rng);
        const std::vector<float> src = random_values(rows * src_cols, rng), dst0 = random_values(rows * dst_cols, rng);
        const std::vector<float> want = expected_copy(src, src_cols, dst0, dst_cols, rows, c);
        auto [got, ref] = both([&](Side& s) {
            const Tensor in = s.input(rows, src_cols, src), out = s.input(rows, dst_cols, dst0);
            s->copy_columns(in, out, c);
            return s.read(out);
        });
        EXPECT_EQ(got, want) << "trial " << trial << ": " << rows << " rows, " << c.n_heads << " heads of " << c.width;
        EXPECT_EQ(ref, want) << "reference, trial " << trial;
    }
}

TEST_P(Contract, CopyColumnsRefusesRangesOutsideItsTensors) {
    if (!test->supports(OpKind::copy_columns)) GTEST_SKIP() << GetParam() << ": declares no copy_columns";
    test.reset();
    const Tensor src = test.tensor(3, 16), dst = test.tensor(3, 16), short_dst = test.tensor(2, 16);
    auto message = [&](const Tensor& from, const Tensor& to, const ColumnCopy& c) {
        try {
            test->copy_columns(from, to, c);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(message(src, dst, {.n_heads = 2, .width = 8, .src_stride = 9, .dst_stride = 8}).find("reads past src"),
              std::string::npos);
    EXPECT_NE(message(src, dst, {.n_heads = 4, .width = 4, .src_stride = 4, .dst_stride = 5}).find("writes past dst"),
              std::string::npos);
    EXPECT_NE(message(src, short_dst, {.n_heads = 1, .width = 4}).find("rows"), std::string::npos);
    EXPECT_NE(message(src, dst, {.n_heads = 2, .width = 4, .dst_stride = 2}).find("overlap"), std::string::npos);
    EXPECT_NE(message(src, src, {.n_heads = 1, .width = 4}).find("same tensor"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::backend::conformance
