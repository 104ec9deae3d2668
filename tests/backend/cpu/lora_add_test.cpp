// The CPU LoRA update (backend/cpu/lora/lora_add.h) on every ISA this CPU has (scalar, AVX2, AVX-512),
// from the f32 A and B and from each compact form (LoraSegment::a_elems / bt_elems in f32, f16 and
// bf16, B transposed), against a double-precision reference computed here from the same numbers,
// over shapes around the lane widths and the ranks' chunks; a row's result bitwise the same alone,
// in a batch, and at any thread count; rows of no segment untouched; strided rows (an update into a
// part of a wider row); several parts in one call (a fused op's Q, K, V) each as alone.
#include "backend/cpu/lora/lora_add.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>

#include "backend/lora_layout.h"
#include "core/cpu_features.h"
#include "core/half.h"

namespace pagoda::backend::cpu {
namespace {

std::vector<Isa> isas() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
        if (int(isa) <= int(best_supported_isa())) out.push_back(isa);
    return out;
}

struct IsaGuard {
    Isa isa = active_isa();
    ~IsaGuard() { set_isa(isa); }
};

// How a test hands an adapter to the kernel: its f32 A and B only, or also a compact form.
enum class Form { f32_only, f32_compact, f16_compact, bf16_compact };
const Form kForms[] = {Form::f32_only, Form::f32_compact, Form::f16_compact, Form::bf16_compact};
const char* form_name(Form f) {
    return f == Form::f32_only ? "f32" : f == Form::f32_compact ? "compact f32" : f == Form::f16_compact ? "compact f16" : "compact bf16";
}

// One adapter's numbers, rounded to the form's type (so the f32 values and the compact ones are the
// same numbers), with its compact form.
struct TestAdapter {
    int64_t rank;
    std::vector<float> a, b;  // rank x in, out x rank
    float scale;
    Form form;
    std::vector<float> bt32;  // B^T in 16-output tiles (backend::lora_bt_index)
    std::vector<uint16_t> a16, bt16;

    LoraSegment segment(std::span<const int32_t> rows) const {
        LoraSegment s{a.data(), b.data(), rank, scale, rows};
        switch (form) {
            case Form::f32_only: break;
            case Form::f32_compact: s.a_elems = a.data(); s.bt_elems = bt32.data(); break;
            case Form::f16_compact: s.elem = gguf::GgmlType::F16; s.a_elems = a16.data(); s.bt_elems = bt16.data(); break;
            case Form::bf16_compact: s.elem = gguf::GgmlType::BF16; s.a_elems = a16.data(); s.bt_elems = bt16.data(); break;
        }
        return s;
    }
};

float rounded(Form f, float v) {
    if (f == Form::f16_compact) return f16_to_f32(f32_to_f16(v));
    if (f == Form::bf16_compact) return bf16_to_f32(f32_to_bf16(v));
    return v;
}

TestAdapter make_adapter(int64_t rank, int64_t in, int64_t out, float scale, std::mt19937& rng, Form form = Form::f32_only) {
    std::normal_distribution<float> d(0.f, 1.f);
    TestAdapter t{rank, {}, {}, scale, form, {}, {}, {}};
    for (int64_t i = 0; i < rank * in; ++i) t.a.push_back(rounded(form, d(rng)));
    for (int64_t i = 0; i < out * rank; ++i) t.b.push_back(rounded(form, d(rng)));
    t.bt32.assign(size_t(lora_bt_size(rank, out)), 0.0f);  // the tiles' padding is zero
    for (int64_t o = 0; o < out; ++o)
        for (int64_t j = 0; j < rank; ++j) t.bt32[size_t(lora_bt_index(rank, j, o))] = t.b[size_t(o * rank + j)];
    auto bits = [&](float v) { return form == Form::f16_compact ? f32_to_f16(v) : f32_to_bf16(v); };
    if (form == Form::f16_compact || form == Form::bf16_compact) {
        for (float v : t.a) t.a16.push_back(bits(v));
        for (float v : t.bt32) t.bt16.push_back(bits(v));
    }
    return t;
}

std::vector<float> randv(int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng);
    return v;
}

// y[t] += scale * B A x[t] in double.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& y, int64_t in, int64_t out,
                              const std::vector<TestAdapter>& adapters, const std::vector<std::vector<int32_t>>& rows) {
    std::vector<double> want(y.begin(), y.end());
    for (size_t i = 0; i < adapters.size(); ++i) {
        const TestAdapter& t = adapters[i];
        for (int32_t r : rows[i]) {
            std::vector<double> h(size_t(t.rank), 0.0);
            for (int64_t j = 0; j < t.rank; ++j)
                for (int64_t c = 0; c < in; ++c) h[size_t(j)] += double(t.a[size_t(j * in + c)]) * x[size_t(r * in + c)];
            for (int64_t o = 0; o < out; ++o) {
                double acc = 0;
                for (int64_t j = 0; j < t.rank; ++j) acc += double(t.b[size_t(o * t.rank + j)]) * h[size_t(j)];
                want[size_t(r * out + o)] += double(t.scale) * acc;
            }
        }
    }
    return want;
}

std::vector<float> run(std::vector<float> y, const std::vector<float>& x, int64_t n, int64_t in, int64_t out,
                       const std::vector<TestAdapter>& adapters, const std::vector<std::vector<int32_t>>& rows,
                       int threads) {
    std::vector<LoraSegment> segs;
    for (size_t i = 0; i < adapters.size(); ++i)
        if (!rows[i].empty()) segs.push_back(adapters[i].segment(rows[i]));
    ThreadPool pool(threads);
    LoraScratch scratch;
    lora_add_rows(x.data(), in, in, y.data(), out, out, n, segs, pool, scratch);
    return y;
}

TEST(LoraAddCpu, EveryIsaMatchesTheDoubleReference) {
    IsaGuard guard;
    std::mt19937 rng(471);
    for (Isa isa : isas()) {
        set_isa(isa);
        for (Form form : kForms)
        for (int trial = 0; trial < 12; ++trial) {
                // Shapes around the lane widths and chunk sizes: 1, 7, 8, 15, 16, 17, 129, 300.
                const int64_t sizes[] = {1, 7, 8, 15, 16, 17, 129, 300};
                const int64_t n = trial == 0 ? 1 : std::uniform_int_distribution<int64_t>(2, 21)(rng);
                const int64_t in = sizes[size_t(trial + 2) % 8], out = sizes[size_t(trial * 3 + 1) % 8];
                std::vector<TestAdapter> adapters;
                for (int64_t r : {int64_t(1), int64_t(8), int64_t(16), int64_t(64), int64_t(9 + trial * 3)})
                    adapters.push_back(make_adapter(r, in, out, 0.5f + float(r) / 8, rng, form));
                std::vector<std::vector<int32_t>> rows(adapters.size());
                for (int32_t t = 0; t < n; ++t)
                    if (t % 5 != 4) rows[size_t(t) % adapters.size()].push_back(t);
                const std::vector<float> x = randv(n * in, rng), y = randv(n * out, rng);
                const std::vector<double> want = reference(x, y, in, out, adapters, rows);
                const std::vector<float> got = run(y, x, n, in, out, adapters, rows, 2);
                for (size_t i = 0; i < got.size(); ++i) {
                    const bool adapted = i / size_t(out) % 5 != 4;
                    if (!adapted) {
                        ASSERT_EQ(got[i], y[i]) << "a row of no segment changed";
                        continue;
                    }
                    ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::sqrt(double(in)) * 4))
                        << isa_name(isa) << " " << form_name(form) << " " << n << "x" << in << "->" << out;
                }
            }
    }
}

// A row's update is bitwise the same alone, among other rows, and at 1 or 3 threads.
TEST(LoraAddCpu, EachRowIsBatchAndThreadInvariant) {
    IsaGuard guard;
    std::mt19937 rng(472);
    const int64_t n = 19, in = 203, out = 270;
    for (Isa isa : isas()) {
        set_isa(isa);
        for (Form form : kForms) {
            std::vector<TestAdapter> adapters;
            for (int64_t r : {int64_t(16), int64_t(35)}) adapters.push_back(make_adapter(r, in, out, 0.75f, rng, form));
            std::vector<std::vector<int32_t>> rows(2);
            for (int32_t t = 0; t < n; ++t) rows[size_t(t % 3 == 0)].push_back(t);
            const std::vector<float> x = randv(n * in, rng), y = randv(n * out, rng);
            const std::vector<float> batched = run(y, x, n, in, out, adapters, rows, 2);
            EXPECT_EQ(batched, run(y, x, n, in, out, adapters, rows, 1)) << isa_name(isa) << form_name(form);
            EXPECT_EQ(batched, run(y, x, n, in, out, adapters, rows, 3)) << isa_name(isa);
            for (int32_t t : {0, 1, 9, 18}) {
                std::vector<std::vector<int32_t>> one(2);
                one[size_t(t % 3 == 0)] = {0};
                const std::vector<float> xt(x.begin() + t * in, x.begin() + (t + 1) * in);
                const std::vector<float> yt(y.begin() + t * out, y.begin() + (t + 1) * out);
                const std::vector<float> alone = run(yt, xt, 1, in, out, adapters, one, 2);
                EXPECT_EQ(alone, std::vector<float>(batched.begin() + t * out, batched.begin() + (t + 1) * out))
                    << isa_name(isa) << " " << form_name(form) << " row " << t;
            }
        }
    }
}

// Rows given with strides: the update lands in its columns of a wider row and nowhere else.
TEST(LoraAddCpu, StridedRowsUpdateOnlyTheirColumns) {
    std::mt19937 rng(473);
    const int64_t n = 5, in = 40, out = 24, x_stride = 48, y_stride = 64, offset = 16;
    std::vector<TestAdapter> adapters = {make_adapter(4, in, out, 1.5f, rng, Form::f16_compact)};
    std::vector<std::vector<int32_t>> rows = {{0, 2, 3}};
    const std::vector<float> x = randv(n * in, rng), y = randv(n * out, rng);
    const std::vector<float> dense = run(y, x, n, in, out, adapters, rows, 2);
    std::vector<float> xw(size_t(n * x_stride), 7.f), yw = randv(n * y_stride, rng);
    for (int64_t t = 0; t < n; ++t) {
        std::copy_n(x.begin() + t * in, in, xw.begin() + t * x_stride);
        std::copy_n(y.begin() + t * out, out, yw.begin() + t * y_stride + offset);
    }
    const std::vector<float> before = yw;
    const LoraSegment seg = adapters[0].segment(rows[0]);
    ThreadPool pool(2);
    LoraScratch scratch;
    lora_add_rows(xw.data(), x_stride, in, yw.data() + offset, y_stride, out, n, {&seg, 1}, pool, scratch);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < y_stride; ++c) {
            const size_t i = size_t(t * y_stride + c);
            if (c >= offset && c < offset + out) EXPECT_EQ(yw[i], dense[size_t(t * out + c - offset)]) << t << "," << c;
            else EXPECT_EQ(yw[i], before[i]) << "column " << c << " of row " << t << " is outside the part";
        }
}


// lora_add_parts over a stacked [Q | K | V] row equals one lora_add_rows per part, bitwise, on every
// ISA, with parts of different adapters, rows and widths (one part with no segment).
TEST(LoraAddCpu, PartsInOneCallEqualOneCallPerPart) {
    IsaGuard guard;
    std::mt19937 rng(474);
    const int64_t n = 7, in = 72, widths[3] = {48, 17, 33}, width = 48 + 17 + 33;
    for (Isa isa : isas()) {
        set_isa(isa);
        for (Form form : kForms) {
            std::vector<TestAdapter> adapters;
            std::vector<std::vector<int32_t>> rows = {{0, 2, 3, 6}, {1, 4}, {5}};
            for (int p = 0; p < 3; ++p)
                for (int64_t r : {int64_t(3), int64_t(16)}) adapters.push_back(make_adapter(r, in, widths[p], 0.25f * float(p + 1), rng, form));
            // Part p takes adapters 2p and 2p+1 on rows[0] and rows[1]; part 1 also adapter 2 on rows[2].
            std::vector<std::vector<LoraSegment>> segs(3);
            for (int p = 0; p < 3; ++p) {
                if (p == 2) continue;  // no update for V
                segs[size_t(p)].push_back(adapters[size_t(2 * p)].segment(rows[0]));
                segs[size_t(p)].push_back(adapters[size_t(2 * p + 1)].segment(rows[1]));
            }
            const std::vector<float> x = randv(n * in, rng), y = randv(n * width, rng);
            ThreadPool pool(2);
            LoraScratch scratch;
            std::vector<float> one_call = y, per_part = y;
            const LoraOutPart parts[3] = {{segs[0], one_call.data(), width, widths[0]},
                                          {segs[1], one_call.data() + widths[0], width, widths[1]},
                                          {segs[2], one_call.data() + widths[0] + widths[1], width, widths[2]}};
            lora_add_parts(x.data(), in, in, n, parts, pool, scratch);
            int64_t offset = 0;
            for (int p = 0; p < 3; ++p) {
                lora_add_rows(x.data(), in, in, per_part.data() + offset, width, widths[p], n, segs[size_t(p)], pool, scratch);
                offset += widths[p];
            }
            EXPECT_EQ(one_call, per_part) << isa_name(isa) << " " << form_name(form);
            EXPECT_NE(one_call, y) << "no update landed";
        }
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu
