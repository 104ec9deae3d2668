// The backend conformance suite (conformance.h): KV writes and block copies, block export and
// import, and paged attention over every KV dtype, against the reference.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using gguf::GgmlType;
using kv::KvDtype;
using namespace testing;

// kv_write stores what the reference stores, bitwise; copy_block copies every layer's K and V.
TEST_P(Conformance, KvWriteAndCopyBlock) {
    std::mt19937 rng(11);
    for (KvDtype dtype : kAllKvDtypes)
        for (int32_t block_size : kBlockSizes) {
            const kv::KvLayout layout = random_layout(dtype, block_size, rng);
            Step step = make_tables({uniform(1, 37, rng), uniform(1, 37, rng)}, block_size, rng);
            for (int32_t seq = 0; seq < 2; ++seq) step.add_tokens(seq, 0, 1 + uniform(0, block_size * int32_t(step.block_tables[size_t(seq)].size()) - 1, rng));
            const int64_t width = int64_t(layout.n_kv_heads) * layout.head_dim;
            const std::vector<float> k = random_values(step.n_tokens() * width, rng), v = random_values(step.n_tokens() * width, rng);
            // Copy the first block of sequence 0 to one nobody owns; read it back through a step
            // whose slots are that block's.
            const int32_t src = step.block_tables[0][0], dst = step.spare_blocks[0];
            Step copied = step;
            for (auto& slot : copied.slots) slot = slot / block_size == src ? int64_t(dst) * block_size + slot % block_size : slot;
            auto [got, want] = both([&](Side& s) {
                auto cache = s->create_kv_cache(layout, step.n_blocks);
                s->begin_step(step.inputs());
                s->kv_write(*cache, 1, s.input(step.n_tokens(), width, k), s.input(step.n_tokens(), width, v));
                s->kv_write(*cache, 0, s.input(step.n_tokens(), width, v), s.input(step.n_tokens(), width, k));
                cache->copy_block(src, dst);
                std::vector<float> out;
                for (const Step* st : {&step, &copied})
                    for (int32_t layer : {0, 1})
                        for (bool is_v : {false, true}) {
                            auto rows = read_kv(*cache, *st, layer, is_v);
                            out.insert(out.end(), rows.begin(), rows.end());
                        }
                return out;
            });
            EXPECT_TRUE(bitwise(got, want)) << kv::kv_dtype_name(dtype) << ", block size " << block_size;
            // In the copy, the tokens of block src read back as themselves.
            const size_t half = got.size() / 2;
            EXPECT_TRUE(bitwise({got.begin() + long(half), got.end()}, {got.begin(), got.begin() + long(half)}));
        }
}

// export_block gives the same bytes on every backend (per layer K then V, [kv_head][slot][head_dim]
// in the element encoding: the prefix tier's payload), and import_block puts a block back exactly.
TEST_P(Conformance, KvBlockExportAndImport) {
    std::mt19937 rng(12);
    for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8})
        for (int32_t block_size : kBlockSizes) {
            const kv::KvLayout layout = random_layout(dtype, block_size, rng);
            Step step = make_tables({uniform(1, 37, rng), uniform(1, 37, rng)}, block_size, rng);
            for (int32_t seq = 0; seq < 2; ++seq) step.add_tokens(seq, 0, 1 + uniform(0, block_size * int32_t(step.block_tables[size_t(seq)].size()) - 1, rng));
            const int64_t width = int64_t(layout.n_kv_heads) * layout.head_dim;
            const std::vector<float> k = random_values(step.n_tokens() * width, rng), v = random_values(step.n_tokens() * width, rng);
            const int32_t src = step.block_tables[0][0], dst = step.spare_blocks[0];
            Step moved = step;
            for (auto& slot : moved.slots) slot = slot / block_size == src ? int64_t(dst) * block_size + slot % block_size : slot;
            auto [got, want] = both([&](Side& s) {
                auto cache = s->create_kv_cache(layout, step.n_blocks);
                s->begin_step(step.inputs());
                s->kv_write(*cache, 0, s.input(step.n_tokens(), width, k), s.input(step.n_tokens(), width, v));
                s->kv_write(*cache, 1, s.input(step.n_tokens(), width, v), s.input(step.n_tokens(), width, k));
                std::vector<uint8_t> bytes(layout.bytes_per_block());
                cache->export_block(src, bytes);
                cache->import_block(dst, bytes);
                std::vector<float> out(bytes.begin(), bytes.end());  // the payload, byte by byte
                for (const Step* st : {&step, &moved})
                    for (int32_t layer : {0, 1})
                        for (bool is_v : {false, true}) {
                            auto rows = read_kv(*cache, *st, layer, is_v);
                            out.insert(out.end(), rows.begin(), rows.end());
                        }
                EXPECT_THROW(cache->export_block(step.n_blocks, bytes), Error);
                std::vector<uint8_t> short_bytes(bytes.size() - 1);
                EXPECT_THROW(cache->import_block(0, short_bytes), Error);
                return out;
            });
            EXPECT_TRUE(bitwise(got, want)) << kv::kv_dtype_name(dtype) << ", block size " << block_size;
            // The imported block reads back as the exported one.
            const size_t payload = layout.bytes_per_block(), half = (got.size() - payload) / 2;
            EXPECT_TRUE(bitwise({got.begin() + long(payload + half), got.end()},
                                {got.begin() + long(payload), got.begin() + long(payload + half)}));
        }
}

struct AttentionCase {
    kv::KvLayout layout;
    AttentionParams params;
    std::vector<int32_t> context, fresh;
    std::vector<float> sinks;  // per query head, or empty: params.sinks is set from these on each side
    // Per sequence, or empty: the fresh positions [image_first, image_last] form an image whose rows
    // attend up to image_last (StepInputs::attend_until); -1: no image in that sequence.
    std::vector<int32_t> image_first, image_last;
    std::string label() const {
        return fmt::format("{} block {} kv_heads {} head_dim {} heads {} window {} softcap {}{}{}", kv::kv_dtype_name(layout.dtype),
                           layout.block_size, layout.n_kv_heads, layout.head_dim, params.n_heads, params.sliding_window,
                           params.softcap, params.causal ? "" : " non-causal", sinks.empty() ? "" : " sinks") +
               (params.alibi_max_bias > 0 ? fmt::format(" alibi {}", params.alibi_max_bias) : "");
    }
};

// dtype: the cycle of f32, f16, bf16 by trial unless given.
AttentionCase random_attention_case(int trial, std::mt19937& rng, std::optional<KvDtype> dtype = std::nullopt) {
    AttentionCase c;
    c.layout = random_layout(dtype ? *dtype : kKvDtypes[trial % 3], kBlockSizes[(trial / 3) % 3], rng);
    const int32_t group = 1 << ((trial / 9) % 3);
    c.params = {c.layout.n_kv_heads * group, 1.0f / std::sqrt(float(c.layout.head_dim)),
                trial % 4 == 1 ? uniform(1, 8, rng) : 0, trial % 4 == 2 ? 1.5f : 0.0f};
    const int32_t n_seqs = uniform(1, 3, rng);
    for (int32_t i = 0; i < n_seqs; ++i) {
        c.context.push_back(uniform(0, 40, rng));
        c.fresh.push_back(uniform(1, 5, rng));
    }
    return c;
}

// Writes every sequence's context in one step, then runs a step of the fresh tokens (each
// sequence's next 1..5 positions: decode and chunked prefill) that writes its K/V and attends:
// all tokens in one call, or (one_by_one) each token alone in a step of its own, or (seq_by_seq)
// each sequence's fresh tokens alone in a step of their own.
enum class Split { none, one_by_one, seq_by_seq };
std::vector<float> run_attention(Side& s, const AttentionCase& c, uint32_t seed, Split split);
std::vector<float> run_attention(Side& s, const AttentionCase& c, uint32_t seed, bool one_by_one = false) {
    return run_attention(s, c, seed, one_by_one ? Split::one_by_one : Split::none);
}
std::vector<float> run_attention(Side& s, const AttentionCase& c, uint32_t seed, Split split) {
    std::mt19937 rng(seed);
    std::vector<int32_t> lengths;
    for (size_t i = 0; i < c.context.size(); ++i) lengths.push_back(c.context[i] + c.fresh[i]);
    const Step tables = make_tables(lengths, c.layout.block_size, rng);
    Step prefix = tables, step = tables;
    for (int32_t i = 0; i < int32_t(lengths.size()); ++i) {
        prefix.add_tokens(i, 0, c.context[size_t(i)]);
        step.add_tokens(i, c.context[size_t(i)], lengths[size_t(i)]);
    }
    // Images: each fresh row's last key and its span's first position (its own outside an image).
    auto inside = [&](int32_t seq, int32_t pos) {
        return !c.image_first.empty() && c.image_first[size_t(seq)] >= 0 && pos >= c.image_first[size_t(seq)] &&
               pos <= c.image_last[size_t(seq)];
    };
    auto until = [&](int32_t seq, int32_t pos) { return inside(seq, pos) ? c.image_last[size_t(seq)] : pos; };
    auto from = [&](int32_t seq, int32_t pos) { return inside(seq, pos) ? c.image_first[size_t(seq)] : pos; };
    auto add_spans = [&](Step& st, int32_t seq, int32_t pos) {
        st.attend_until.push_back(until(seq, pos));
        st.attend_from.push_back(from(seq, pos));
    };
    if (!c.image_first.empty())
        for (int64_t t = 0; t < step.n_tokens(); ++t) add_spans(step, step.seq_index[size_t(t)], step.positions[size_t(t)]);
    const int64_t width = int64_t(c.layout.n_kv_heads) * c.layout.head_dim;
    auto cache = s->create_kv_cache(c.layout, tables.n_blocks);
    const int32_t layer = 1;
    for (const Step* st : {&prefix, &step}) {
        const int64_t n = st->n_tokens();
        if (n == 0) continue;
        const std::vector<float> k = random_values(n * width, rng), v = random_values(n * width, rng);
        s->begin_step(st->inputs());
        s->kv_write(*cache, layer, s.input(n, width, k), s.input(n, width, v));
    }
    // Large queries so that softcaps bite and the softmax is peaky.
    const int64_t q_width = int64_t(c.params.n_heads) * c.layout.head_dim;
    const std::vector<float> q = random_values(step.n_tokens() * q_width, rng, 3.0f);
    AttentionParams params = c.params;
    std::shared_ptr<Vector> sinks;
    if (!c.sinks.empty()) {
        sinks = s->upload_vector(c.sinks);
        params.sinks = sinks.get();
    }
    if (split == Split::none) {
        const Tensor out = s.tensor(step.n_tokens(), q_width);
        s->attention(*cache, layer, s.input(step.n_tokens(), q_width, q), out, params);
        return s.read(out);
    }
    std::vector<float> rows;
    if (split == Split::seq_by_seq) {
        int64_t first = 0;
        for (int32_t i = 0; i < int32_t(lengths.size()); ++i) {
            Step alone = tables;
            alone.add_tokens(i, c.context[size_t(i)], lengths[size_t(i)]);
            if (!c.image_first.empty())
                for (int32_t p = c.context[size_t(i)]; p < lengths[size_t(i)]; ++p) add_spans(alone, i, p);
            const int64_t n = alone.n_tokens();
            s->begin_step(alone.inputs());
            const Tensor out = s.tensor(n, q_width);
            s->attention(*cache, layer, s.input(n, q_width, {q.begin() + first * q_width, q.begin() + (first + n) * q_width}),
                         out, params);
            const std::vector<float> part = s.read(out);
            rows.insert(rows.end(), part.begin(), part.end());
            first += n;
        }
        return rows;
    }
    for (int64_t t = 0; t < step.n_tokens(); ++t) {
        Step alone = tables;
        alone.add_tokens(step.seq_index[size_t(t)], step.positions[size_t(t)], step.positions[size_t(t)] + 1);
        if (!step.attend_until.empty()) add_spans(alone, step.seq_index[size_t(t)], step.positions[size_t(t)]);
        s->begin_step(alone.inputs());
        const Tensor out = s.tensor(1, q_width);
        s->attention(*cache, layer, s.input(1, q_width, {q.begin() + t * q_width, q.begin() + (t + 1) * q_width}), out, params);
        const std::vector<float> row = s.read(out);
        rows.insert(rows.end(), row.begin(), row.end());
    }
    return rows;
}

TEST_P(Conformance, PagedAttention) {
    std::mt19937 rng(12);
    for (int trial = 0; trial < 36; ++trial) {
        const AttentionCase c = random_attention_case(trial, rng);
        if (!test->supports_attention(c.params)) {  // refused clearly, never computed wrongly
            EXPECT_THROW(run_attention(test, c, uint32_t(100 + trial)), Error) << c.label();
            test.reset();
            continue;
        }
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(100 + trial)); });
        EXPECT_TRUE(close(got, want, attention_tolerance(c.layout.dtype))) << c.label();
    }
}

// Non-causal attention (encoders): each fresh token attends to every key of its sequence up to the
// sequence's last fresh position, later ones included. Runs longer than a key tile (64) and a query
// tile; a backend without it refuses the params (supports_attention) and the call.
AttentionCase non_causal_case(int trial, std::mt19937& rng, std::optional<KvDtype> dtype = std::nullopt) {
    AttentionCase c = random_attention_case(trial, rng, dtype);
    c.params.sliding_window = 0;
    c.params.causal = false;
    for (size_t i = 0; i < c.fresh.size(); ++i) {
        c.fresh[i] = uniform(1, 90, rng);
        if (trial % 2 == 0) c.context[i] = 0;  // an encoder's step: the whole sequence at once
    }
    return c;
}

TEST_P(Conformance, PagedAttentionNonCausal) {
    std::mt19937 rng(21);
    for (int trial = 0; trial < 18; ++trial) {
        const AttentionCase c = non_causal_case(trial, rng, trial >= 15 ? std::optional(KvDtype::q8) : std::nullopt);
        if (!test->supports_attention(c.params)) {  // refused clearly, never computed wrongly
            EXPECT_THROW(run_attention(test, c, uint32_t(400 + trial)), Error) << c.label();
            test.reset();
            continue;
        }
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(400 + trial)); });
        EXPECT_TRUE(close(got, want, attention_tolerance(c.layout.dtype))) << c.label() << " non-causal";
    }
}

// A sequence's non-causal attention is the same, bitwise, alone in a step as beside others.
TEST_P(Contract, NonCausalAttentionIsBatchInvariant) {
    std::mt19937 rng(22);
    int checked = 0;
    for (int trial = 0; trial < 12; ++trial) {
        const AttentionCase c = non_causal_case(trial * 5 + 1, rng);
        if (!test->supports_attention(c.params)) continue;  // PagedAttentionNonCausal checks the refusal
        ++checked;
        test.reset();
        const std::vector<float> batch = run_attention(test, c, uint32_t(500 + trial));
        test.reset();
        EXPECT_TRUE(bitwise(run_attention(test, c, uint32_t(500 + trial), Split::seq_by_seq), batch)) << c.label();
    }
    EXPECT_GT(checked, 0) << GetParam() << " supports no non-causal attention";
}

// Over a q8 cache: against the reference's q8 within the f32 tolerance (both read the same stored
// values), and against the same case over an f16 cache within the q8 one.
TEST_P(Conformance, PagedAttentionQ8) {
    std::mt19937 rng(17);
    int checked = 0;
    for (int trial = 0; trial < 18; ++trial) {
        AttentionCase c = random_attention_case(trial * 2 + trial / 9, rng, KvDtype::q8);
        if (!test->supports_attention(c.params)) continue;  // PagedAttention checks the refusal
        ++checked;
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(300 + trial)); });
        EXPECT_TRUE(close(got, want, kAttentionTolerance)) << c.label();
        c.layout.dtype = KvDtype::f16;
        test.reset();
        const std::vector<float> f16 = run_attention(test, c, uint32_t(300 + trial));
        EXPECT_TRUE(close(got, f16, kQ8VersusF16Tolerance)) << c.label() << " vs f16";
        EXPECT_FALSE(bitwise(got, f16)) << c.label() << ": q8 gave f16's bits";
    }
    EXPECT_GE(checked, 6) << "the cases without window or softcap (a third) are any backend's";
}

// Each token attends the same alone as inside the step (batch invariance), bitwise.
TEST_P(Contract, AttentionIsBatchInvariant) {
    std::mt19937 rng(16);
    int checked = 0;
    for (int trial = 0; trial < 16; ++trial) {
        const AttentionCase c = random_attention_case(trial * 5 + 1, rng, trial >= 12 ? std::optional(KvDtype::q8) : std::nullopt);
        if (!test->supports_attention(c.params)) continue;  // PagedAttention checks the refusal
        ++checked;
        test.reset();
        const std::vector<float> batch = run_attention(test, c, uint32_t(200 + trial));
        test.reset();
        EXPECT_TRUE(bitwise(run_attention(test, c, uint32_t(200 + trial), true), batch)) << c.label();
    }
    EXPECT_GE(checked, 4) << "the cases without window or softcap are any backend's";
}

// Attention sinks (gpt-oss): a logit per query head in each softmax's denominator, with sliding
// windows and without, every KV type; against the reference, and batch invariant. Sinks from -4 to
// 6 against scores of a few units: from no effect to most of the mass. A backend without sinks
// refuses them (supports_attention) and the call.
AttentionCase sink_case(int trial, std::mt19937& rng) {
    AttentionCase c = random_attention_case(trial, rng, trial % 4 == 3 ? std::optional(KvDtype::q8) : std::nullopt);
    c.params.softcap = 0;
    for (int32_t h = 0; h < c.params.n_heads; ++h) c.sinks.push_back(-4.0f + 10.0f * float(uniform(0, 100, rng)) / 100.0f);
    return c;
}

TEST_P(Conformance, PagedAttentionWithSinks) {
    std::mt19937 rng(31);
    for (int trial = 0; trial < 24; ++trial) {
        const AttentionCase c = sink_case(trial, rng);
        AttentionParams probe = c.params;
        const auto sinks = test->upload_vector(c.sinks);
        probe.sinks = sinks.get();
        if (!test->supports_attention(probe)) {
            EXPECT_THROW(run_attention(test, c, uint32_t(600 + trial)), Error) << c.label();
            test.reset();
            continue;
        }
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(600 + trial)); });
        EXPECT_TRUE(close(got, want, c.layout.dtype == KvDtype::q8 ? kAttentionTolerance : attention_tolerance(c.layout.dtype)))
            << c.label();
    }
}

TEST_P(Contract, AttentionWithSinksIsBatchInvariant) {
    std::mt19937 rng(32);
    for (int trial = 0; trial < 12; ++trial) {
        const AttentionCase c = sink_case(trial * 5 + 1, rng);
        AttentionParams probe = c.params;
        const auto sinks = test->upload_vector(c.sinks);
        probe.sinks = sinks.get();
        if (!test->supports_attention(probe)) continue;  // PagedAttentionWithSinks checks the refusal
        test.reset();
        const std::vector<float> batch = run_attention(test, c, uint32_t(700 + trial));
        test.reset();
        EXPECT_TRUE(bitwise(run_attention(test, c, uint32_t(700 + trial), true), batch)) << c.label();
    }
}

// ALiBi (jina-bert-v2): -slope_h |pos_q - pos_k| on each score, causal and non-causal (the
// encoder's), with windows, soft caps and sinks as random_attention_case draws them, over every KV
// type. A backend without it refuses the params (supports_attention) and the call.
AttentionCase alibi_case(int trial, std::mt19937& rng) {
    AttentionCase c = trial % 2 == 0 ? non_causal_case(trial, rng, trial % 8 == 6 ? std::optional(KvDtype::q8) : std::nullopt)
                                     : random_attention_case(trial, rng, trial % 8 == 7 ? std::optional(KvDtype::q8) : std::nullopt);
    c.params.alibi_max_bias = trial % 3 == 0 ? 8.0f : 0.5f + float(uniform(0, 60, rng)) / 10.0f;
    if (trial % 5 == 4)
        for (int32_t h = 0; h < c.params.n_heads; ++h) c.sinks.push_back(-2.0f + 4.0f * float(uniform(0, 100, rng)) / 100.0f);
    return c;
}

TEST_P(Conformance, PagedAttentionAlibi) {
    std::mt19937 rng(41);
    for (int trial = 0; trial < 24; ++trial) {
        const AttentionCase c = alibi_case(trial, rng);
        if (!test->supports_attention(c.params)) {  // refused clearly, never computed wrongly
            EXPECT_THROW(run_attention(test, c, uint32_t(800 + trial)), Error) << c.label();
            test.reset();
            continue;
        }
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(800 + trial)); });
        EXPECT_TRUE(close(got, want, c.layout.dtype == KvDtype::q8 ? kAttentionTolerance : attention_tolerance(c.layout.dtype)))
            << c.label();
    }
}

// Each token's ALiBi attention is the same, bitwise, in a step with other sequences, alone with
// its sequence (non-causal) or alone in a step (causal).
TEST_P(Contract, AlibiAttentionIsBatchInvariant) {
    std::mt19937 rng(42);
    int checked = 0;
    for (int trial = 0; trial < 12; ++trial) {
        const AttentionCase c = alibi_case(trial, rng);
        if (!test->supports_attention(c.params)) continue;  // PagedAttentionAlibi checks the refusal
        ++checked;
        test.reset();
        const std::vector<float> batch = run_attention(test, c, uint32_t(900 + trial));
        test.reset();
        const Split split = c.params.causal ? Split::one_by_one : Split::seq_by_seq;
        EXPECT_TRUE(bitwise(run_attention(test, c, uint32_t(900 + trial), split), batch)) << c.label();
    }
    if (GetParam().rfind("cpu", 0) == 0 || GetParam() == "reference") { EXPECT_GT(checked, 0) << GetParam(); }
}

// Image rows (Gemma 3 vision, StepInputs::attend_until): a span of each sequence's fresh rows
// attends up to the span's last position, later keys of the step included; rows before and after
// stay causal. With sliding windows (from each row's own position, reaching to its image's start:
// images past the window and longer than it), soft caps, sinks and every KV type; against the
// reference, and each row the same alone in a step (batch invariance).
AttentionCase image_case(int trial, std::mt19937& rng) {
    AttentionCase c = random_attention_case(trial, rng, trial % 4 == 3 ? std::optional(KvDtype::q8) : std::nullopt);
    if (trial % 3 == 2)
        for (int32_t h = 0; h < c.params.n_heads; ++h) c.sinks.push_back(-2.0f + 4.0f * float(uniform(0, 100, rng)) / 100.0f);
    for (size_t i = 0; i < c.fresh.size(); ++i) {
        c.fresh[i] = uniform(2, 70, rng);
        const int32_t first = c.context[i] + uniform(0, c.fresh[i] - 2, rng);
        const bool image = uniform(0, 3, rng) > 0;
        c.image_first.push_back(image ? first : -1);
        c.image_last.push_back(image ? uniform(first + 1, c.context[i] + c.fresh[i] - 1, rng) : -1);
    }
    return c;
}

TEST_P(Conformance, PagedAttentionImageRows) {
    std::mt19937 rng(41);
    for (int trial = 0; trial < 12; ++trial) {
        const AttentionCase c = image_case(trial, rng);
        auto [got, want] = both([&](Side& s) { return run_attention(s, c, uint32_t(800 + trial)); });
        EXPECT_TRUE(close(got, want, c.layout.dtype == KvDtype::q8 ? kAttentionTolerance : attention_tolerance(c.layout.dtype)))
            << c.label() << " image rows";
    }
}

TEST_P(Contract, ImageRowsAreBatchInvariant) {
    std::mt19937 rng(42);
    for (int trial = 0; trial < 6; ++trial) {
        const AttentionCase c = image_case(trial * 5 + 1, rng);
        test.reset();
        const std::vector<float> batch = run_attention(test, c, uint32_t(900 + trial));
        test.reset();
        EXPECT_TRUE(bitwise(run_attention(test, c, uint32_t(900 + trial), true), batch)) << c.label() << " image rows";
    }
}

// --- fused ops, each against its unfused sequence on the backend under test ---
}  // namespace
}  // namespace pagoda::backend::conformance
