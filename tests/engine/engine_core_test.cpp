// EngineCore driven step by step over a FakeStepModel: greedy outputs against a KV-free reference,
// preemption, cancellation, rejection, stop strings, UTF-8 streaming, n > 1 forks, logprobs, faults.
#include "engine/engine_core.h"

#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/fake_step_model.h"
#include "engine/engine_test_util.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::FakeStepModel;
using test::greedy_request;
using test::make_prompt;
using test::reference_greedy;
using test::reference_sampled;

constexpr int64_t kVocab = 48;

TEST(EngineCore, GreedyOutputsMatchReferenceUnderPreemptionAndChunking) {
    // 10 blocks of 4 tokens: far less than the 12 requests need at once, so sequences get preempted
    // and recomputed; an 8-token budget forces chunked prefill beside decodes.
    FakeStepModel model(kVocab, 10, 4);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 8, .max_seqs = 4};
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    std::map<RequestId, std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 12; ++i) {
        auto p = make_prompt(3 + i % 7 * 2, i, kVocab);
        prompts[driver.add(greedy_request(p, 9 + i % 5))] = p;
    }
    driver.run();
    EXPECT_GT(core.stats().preemptions, 0);
    for (const auto& [id, p] : prompts) {
        const auto& r = driver.results[id];
        ASSERT_TRUE(r.done);
        const auto& c = r.choices.at(0);
        EXPECT_EQ(c.tokens, reference_greedy(p, int64_t(c.tokens.size()), kVocab)) << "request " << id;
        EXPECT_EQ(int64_t(c.tokens.size()), 9 + int64_t((id - 1) % 5));
        EXPECT_EQ(c.finish, FinishReason::length);
        EXPECT_EQ(r.usage.prompt_tokens, int64_t(p.size()));
        EXPECT_EQ(r.usage.completion_tokens, int64_t(c.tokens.size()));
        EXPECT_EQ(c.deltas, int(c.tokens.size()));  // one delta per token, the last with the finish
    }
    for (int64_t n : model.step_sizes) EXPECT_LE(n, 8);
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    EXPECT_EQ(core.num_requests(), 0u);
}

TEST(EngineCore, SharedPrefixIsServedFromCacheAndReported) {
    FakeStepModel model(kVocab, 64, 4);
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    auto prefix = make_prompt(17, 5, kVocab);
    RequestId a = driver.add(greedy_request(prefix, 3));
    driver.run();
    auto longer = prefix;
    longer.push_back(7);
    RequestId b = driver.add(greedy_request(longer, 3));
    driver.run();
    EXPECT_EQ(driver.results[a].usage.cached_prompt_tokens, 0);
    EXPECT_EQ(driver.results[b].usage.cached_prompt_tokens, 16);  // 4 full blocks of the shared prefix
    EXPECT_EQ(driver.results[b].choices[0].tokens, reference_greedy(longer, 3, kVocab));
    EXPECT_EQ(core.stats().prefix_hit_tokens, 16);
}

TEST(EngineCore, CancellationFreesEveryBlock) {
    FakeStepModel model(kVocab, 32, 4);
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 16, .max_seqs = 3}});
    Driver driver(core);
    std::vector<RequestId> ids;
    for (uint32_t i = 0; i < 6; ++i) {
        Request r = greedy_request(make_prompt(10, i, kVocab), 50);
        r.n = i % 2 ? 2 : 1;
        ids.push_back(driver.add(r));
    }
    for (int i = 0; i < 5; ++i) core.step();
    EXPECT_GT(core.blocks().num_used_blocks(), 0);
    for (RequestId id : ids) EXPECT_TRUE(core.cancel(id));
    EXPECT_FALSE(core.cancel(ids[0]));
    driver.collect();
    EXPECT_FALSE(core.has_work());
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    EXPECT_EQ(core.blocks().num_free_blocks() + core.blocks().num_evictable_blocks(), 32);
    for (size_t i = 0; i < ids.size(); ++i) {
        const auto& r = driver.results[ids[i]];
        EXPECT_TRUE(r.done);
        ASSERT_EQ(r.choices.size(), i % 2 ? 2u : 1u);
        for (const auto& [index, c] : r.choices) EXPECT_EQ(c.finish, FinishReason::cancelled);
    }
    EXPECT_EQ(core.stats().requests_cancelled, 6);
}

TEST(EngineCore, ImpossibleOrMalformedRequestsAreRejected) {
    FakeStepModel model(kVocab, 8, 4, /*max_context=*/100);  // the pool holds 32 tokens
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 16, .max_seqs = 4}});
    EXPECT_EQ(core.context_limit(), 32);
    auto expect_reject = [&](Request r, const std::string& needle) {
        try {
            core.validate(r);
            ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_reject(greedy_request(make_prompt(32, 1, kVocab), 4), "no room");
    expect_reject(greedy_request({}, 4), "empty");
    expect_reject(greedy_request({1, 2, int32_t(kVocab)}, 4), "out of range");
    Request r = greedy_request({1, 2}, 4);
    r.n = 5;
    expect_reject(r, "n must be");
    r = greedy_request({1, 2}, 4);
    r.logprobs = 21;
    expect_reject(r, "logprobs");
    r = greedy_request({1, 2}, 0);
    expect_reject(r, "max_tokens");
    r = greedy_request({1, 2}, 4);
    r.stop.stop = {"x"};
    expect_reject(r, "tokenizer");
    r = greedy_request({1, 2}, 4);
    r.sampling.top_p = 0;
    expect_reject(r, "top_p");
    EXPECT_NO_THROW(core.validate(greedy_request(make_prompt(31, 1, kVocab), 4)));
}

TEST(EngineCore, LengthLimitStopsAtTheContextLimit) {
    FakeStepModel model(kVocab, 4, 4, /*max_context=*/12);
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 16, .max_seqs = 4}});
    Driver driver(core);
    RequestId id = driver.add(greedy_request(make_prompt(5, 3, kVocab), 100));
    driver.run();
    const auto& c = driver.results[id].choices[0];
    EXPECT_EQ(c.tokens.size(), 7u);  // 5 + 7 = 12 = the model's context
    EXPECT_EQ(c.finish, FinishReason::length);
}

TEST(EngineCore, ForkedChoicesShareThePromptAndFollowTheirSeeds) {
    FakeStepModel model(kVocab, 64, 4);
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    auto prompt = make_prompt(10, 9, kVocab);
    Request r;
    r.prompt = prompt;
    r.n = 3;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 100;
    r.stop.max_tokens = 12;
    RequestId forked = driver.add(r);
    core.step();  // prompt computed, forked, first tokens sampled
    // Three sequences share the prompt's two full blocks and its partial third block.
    auto seqs = core.blocks().sequences();
    ASSERT_EQ(seqs.size(), 3u);
    const auto& t0 = core.blocks().block_table(seqs[0]);
    for (auto s : seqs) EXPECT_EQ(core.blocks().block_table(s), t0);
    for (int32_t b : t0) EXPECT_EQ(core.blocks().ref_count(b), 3);
    EXPECT_EQ(core.blocks().num_used_blocks(), 3);
    driver.run();
    // Choice i draws from the keyed stream (seed, i, position): the reference computes it from the
    // prompt alone; choice 0 is also what an n = 1 request with the same seed gives.
    for (int32_t i = 0; i < 3; ++i)
        EXPECT_EQ(driver.results[forked].choices[i].tokens, reference_sampled(prompt, 12, r.sampling, uint64_t(i), kVocab))
            << "choice " << i;
    Request single = r;
    single.n = 1;
    RequestId id = driver.add(single);
    driver.run();
    EXPECT_EQ(driver.results[forked].choices[0].tokens, driver.results[id].choices[0].tokens);
    EXPECT_NE(driver.results[forked].choices[0].tokens, driver.results[forked].choices[1].tokens);
    EXPECT_EQ(driver.results[forked].usage.completion_tokens, 36);
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
}

TEST(EngineCore, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
    FakeStepModel model(kVocab, 64, 4);
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    auto prompt = make_prompt(6, 2, kVocab);
    Request r = greedy_request(prompt, 4);
    r.logprobs = 3;
    r.sampling.logit_bias[5] = 50.0f;  // the sampler picks 5; logprobs still describe the raw model
    RequestId id = driver.add(r);
    driver.run();
    const auto& c = driver.results[id].choices[0];
    ASSERT_EQ(c.logprobs.size(), 4u);
    auto context = prompt;
    for (size_t k = 0; k < 4; ++k) {
        std::vector<float> l(kVocab);
        test::hashed_logits(context, l.data(), kVocab);
        double m = *std::max_element(l.begin(), l.end()), sum = 0;
        for (float v : l) sum += std::exp(double(v) - m);
        auto lp = [&](int32_t t) { return double(l[size_t(t)]) - m - std::log(sum); };
        EXPECT_EQ(c.tokens[k], 5);
        EXPECT_NEAR(c.logprobs[k].logprob, lp(5), 1e-5);
        ASSERT_EQ(c.logprobs[k].top.size(), 3u);
        std::vector<int32_t> order(kVocab);
        for (int32_t t = 0; t < kVocab; ++t) order[size_t(t)] = t;
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
        for (size_t j = 0; j < 3; ++j) {
            EXPECT_EQ(c.logprobs[k].top[j].first, order[j]);
            EXPECT_NEAR(c.logprobs[k].top[j].second, lp(order[j]), 1e-5);
        }
        context.push_back(5);
    }
}

TEST(EngineCore, ForwardFailureFailsThatBatchOnlyAndTheEngineContinues) {
    FakeStepModel model(kVocab, 64, 4);
    model.fail_on_token = 47;
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    RequestId good = driver.add(greedy_request({1, 2, 3}, 3));
    RequestId bad = driver.add(greedy_request({1, 47, 3}, 3));
    core.step();  // both prompts in one batch: both fail
    driver.collect();
    EXPECT_EQ(driver.results[bad].choices[0].finish, FinishReason::error);
    EXPECT_NE(driver.results[bad].choices[0].error.find("poisoned"), std::string::npos);
    EXPECT_EQ(driver.results[good].choices[0].finish, FinishReason::error);
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    RequestId after = driver.add(greedy_request({1, 2, 3}, 3));
    driver.run();
    EXPECT_EQ(driver.results[after].choices[0].finish, FinishReason::length);
    EXPECT_EQ(driver.results[after].choices[0].tokens, reference_greedy({1, 2, 3}, 3, kVocab));
    EXPECT_EQ(core.stats().requests_failed, 2);
}

TEST(EngineCore, ThrowingDeltaCallbackDoesNotStopTheEngine) {
    FakeStepModel model(kVocab, 64, 4);
    EngineCore core(model, nullptr, {});
    int calls = 0;
    core.add(1000, greedy_request({4, 5}, 3), nullptr, [&](const Delta&) {
        ++calls;
        throw std::runtime_error("client went away");
    });
    Driver driver(core);
    RequestId other = driver.add(greedy_request({4, 5}, 3));
    driver.run();
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(driver.results[other].choices[0].tokens, reference_greedy({4, 5}, 3, kVocab));
}

// ---- text: a small SentencePiece vocabulary and a scripted model ----

std::shared_ptr<const tokenizer::Tokenizer> text_tokenizer() {
    tokenizer::VocabSpec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "<0xE2>", "<0x82>", "<0xAC>", "he", "llo", "\xE2\x96\x81wo", "rld",
                "\xE2\x96\x81", "lo", "!"};
    s.token_types = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1};
    while (s.tokens.size() < size_t(kVocab)) {
        s.tokens.push_back("t" + std::to_string(s.tokens.size()));
        s.token_types.push_back(1);
    }
    return tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(s));
}

// Generates script[k] as the k-th token after a prompt of prompt_len tokens, then token 12 ("!").
FakeStepModel::LogitsFn scripted(std::vector<int32_t> script, size_t prompt_len) {
    return [script, prompt_len](const std::vector<int32_t>& context, float* logits, int64_t vocab) {
        for (int64_t i = 0; i < vocab; ++i) logits[i] = 0;
        const size_t k = context.size() - prompt_len;
        logits[k < script.size() ? script[k] : 12] = 10;
    };
}

struct TextRun {
    test::ChoiceResult choice;
    std::vector<std::string> pieces;
    std::string stop_string;  // the finishing delta's
};

TextRun run_text(std::vector<int32_t> script, std::vector<std::string> stops, int64_t max_tokens = 10) {
    FakeStepModel model(kVocab, 64, 4, 1 << 20, scripted(script, 2));
    EngineCore core(model, text_tokenizer(), {});
    auto q = std::make_shared<DeltaQueue>();
    Request r = greedy_request({1, 12}, max_tokens);
    r.stop.stop = std::move(stops);
    core.add(1, r, q);
    TextRun out;
    while (core.has_work()) core.step();
    while (auto d = q->try_pop()) {
        out.pieces.push_back(d->text);
        out.choice.text += d->text;
        out.choice.tokens.insert(out.choice.tokens.end(), d->token_ids.begin(), d->token_ids.end());
        if (d->finish_reason) {
            out.choice.finish = d->finish_reason;
            out.stop_string = d->stop_string;
        }
    }
    return out;
}

TEST(EngineCoreText, StopStringAcrossTokenBoundariesIsHeldBackAndExcluded) {
    // "he" "llo" " wo" "rld": the stop "lo wo" spans three tokens.
    auto r = run_text({6, 7, 8, 9, 12}, {"lo wo"});
    EXPECT_EQ(r.choice.text, "hel");
    EXPECT_EQ(r.choice.finish, FinishReason::stop);
    EXPECT_EQ(r.choice.tokens, (std::vector<int32_t>{6, 7, 8}));
    EXPECT_EQ(r.stop_string, "lo wo");  // the finishing delta names it (Anthropic's stop_sequence)
    // Of several, the one found earliest in the text is named, whatever the list's order.
    auto two = run_text({6, 7, 8, 9, 12}, {"wor", "llo"});
    EXPECT_EQ(two.choice.text, "he");
    EXPECT_EQ(two.stop_string, "llo");
    // Text that may be the start of a stop string waits for the next token to decide.
    auto held = run_text({6, 7, 8, 9, 12, 12}, {"llo!"}, 6);
    EXPECT_EQ(held.choice.text, "hello world!!");
    EXPECT_EQ(held.choice.finish, FinishReason::length);
    ASSERT_EQ(held.pieces.size(), 6u);
    EXPECT_EQ(held.pieces[0], "he");
    EXPECT_EQ(held.pieces[1], "");        // "llo" might be the start of "llo!"
    EXPECT_EQ(held.pieces[2], "llo wo");  // decided by the next token
}

TEST(EngineCoreText, EndOfGenerationAndStopTokens) {
    auto eos = run_text({6, 7, 2, 6}, {});
    EXPECT_EQ(eos.choice.text, "hello");
    EXPECT_EQ(eos.choice.finish, FinishReason::stop);
    EXPECT_EQ(eos.stop_string, "");  // no stop string ended it
    EXPECT_EQ(eos.choice.tokens, (std::vector<int32_t>{6, 7, 2}));
}

TEST(EngineCoreText, Utf8IsNeverSplit) {
    // "€" = E2 82 AC arrives as three byte tokens; no delta carries part of it.
    auto r = run_text({6, 3, 4, 5, 11}, {}, 5);
    ASSERT_EQ(r.pieces.size(), 5u);
    EXPECT_EQ(r.pieces[0], "he");
    EXPECT_EQ(r.pieces[1], "");
    EXPECT_EQ(r.pieces[2], "");
    EXPECT_EQ(r.pieces[3], "\xE2\x82\xAC");
    EXPECT_EQ(r.pieces[4], "lo");
    // A stop string made of the multi-byte character itself.
    auto s = run_text({6, 3, 4, 5, 11}, {"\xE2\x82\xAC"}, 5);
    EXPECT_EQ(s.choice.text, "he");
    EXPECT_EQ(s.choice.finish, FinishReason::stop);
    // Cut off mid-character by max_tokens: the broken tail becomes U+FFFD.
    auto cut = run_text({6, 3, 4, 5}, {}, 2);
    EXPECT_EQ(cut.choice.text, "he\xEF\xBF\xBD");
}

TEST(EngineCoreText, DetokenizerFailureFailsOnlyThatRequest) {
    // The model's vocabulary (64) is larger than the tokenizer's (48): token 60 has no text.
    FakeStepModel model(64, 64, 4, 1 << 20, [](const std::vector<int32_t>& context, float* logits, int64_t vocab) {
        for (int64_t i = 0; i < vocab; ++i) logits[i] = 0;
        logits[context[0] == 20 ? 60 : 6] = 10;
    });
    EngineCore core(model, text_tokenizer(), {});
    Driver driver(core);
    RequestId bad = driver.add(greedy_request({20, 21}, 4));
    RequestId good = driver.add(greedy_request({21, 21}, 4));
    driver.run();
    EXPECT_EQ(driver.results[bad].choices[0].finish, FinishReason::error);
    EXPECT_NE(driver.results[bad].choices[0].error.find("out of range"), std::string::npos);
    EXPECT_EQ(driver.results[good].choices[0].finish, FinishReason::length);
    EXPECT_EQ(driver.results[good].choices[0].text, "hehehehe");
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
}

// min_tokens: the script's token wins (logit 10) unless masked; "lo" (11) is the runner-up (5).
TextRun run_min_tokens(std::vector<int32_t> script, int64_t min_tokens, std::vector<std::string> stops = {},
                       std::vector<int32_t> stop_ids = {}, int64_t max_tokens = 6) {
    FakeStepModel model(kVocab, 64, 4, 1 << 20, [script](const std::vector<int32_t>& context, float* logits, int64_t vocab) {
        for (int64_t i = 0; i < vocab; ++i) logits[i] = 0;
        const size_t k = context.size() - 2;
        logits[11] = 5;
        logits[k < script.size() ? script[k] : 12] = 10;
    });
    EngineCore core(model, text_tokenizer(), {});
    auto q = std::make_shared<DeltaQueue>();
    Request r = greedy_request({1, 12}, max_tokens);
    r.stop.min_tokens = min_tokens;
    r.stop.stop = std::move(stops);
    r.stop.stop_token_ids = std::move(stop_ids);
    core.add(1, r, q);
    TextRun out;
    while (core.has_work()) core.step();
    while (auto d = q->try_pop()) {
        out.choice.text += d->text;
        out.choice.tokens.insert(out.choice.tokens.end(), d->token_ids.begin(), d->token_ids.end());
        if (d->finish_reason) out.choice.finish = d->finish_reason;
    }
    return out;
}

TEST(EngineCoreText, MinTokensSuppressesEndOfSequenceStopTokensAndStopStrings) {
    // End of sequence (2) is the model's choice from the second token on.
    EXPECT_EQ(run_min_tokens({6, 2, 2, 2}, 0).choice.tokens, (std::vector<int32_t>{6, 2}));
    auto eos = run_min_tokens({6, 2, 2, 2}, 3);
    EXPECT_EQ(eos.choice.tokens, (std::vector<int32_t>{6, 11, 11, 2})) << "EOS allowed once 3 tokens exist";
    EXPECT_EQ(eos.choice.text, "helolo");
    EXPECT_EQ(eos.choice.finish, FinishReason::stop);
    // stop_token_ids likewise.
    auto ids = run_min_tokens({6, 9, 9}, 2, {}, {9});
    EXPECT_EQ(ids.choice.tokens, (std::vector<int32_t>{6, 11, 9}));
    EXPECT_EQ(ids.choice.finish, FinishReason::stop);
    // A stop string complete before min_tokens is output; the next one after it stops.
    EXPECT_EQ(run_min_tokens({6, 11, 11, 11}, 0, {"lo"}).choice.text, "he");
    auto str = run_min_tokens({6, 11, 11, 11}, 3, {"lo"});
    EXPECT_EQ(str.choice.text, "helo");
    EXPECT_EQ(str.choice.tokens.size(), 3u);
    EXPECT_EQ(str.choice.finish, FinishReason::stop);
    // One that starts before min_tokens and ends after it stops there.
    auto across = run_min_tokens({6, 11, 11, 11}, 3, {"ol"});
    EXPECT_EQ(across.choice.text, "hel");
    EXPECT_EQ(across.choice.finish, FinishReason::stop);
    // min_tokens above max_tokens could never be met: validate() refuses it.
    FakeStepModel model(kVocab, 64, 4, 1 << 20, scripted({6}, 2));
    EngineCore core(model, text_tokenizer(), {});
    Request bad = greedy_request({1, 12}, 2);
    bad.stop.min_tokens = 3;
    EXPECT_THROW(core.validate(bad), Error);
}

TEST(EngineCoreText, LeadingSpaceOfTheFirstGeneratedPieceIsKept) {
    auto r = run_text({8, 9}, {}, 2);
    EXPECT_EQ(r.choice.text, " world");
}

}  // namespace
}  // namespace pagoda::engine
