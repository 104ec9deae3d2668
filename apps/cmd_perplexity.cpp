// `pagoda perplexity`: perplexity of a model on a text file and, with --kl-base, how far a quantised
// model's next-token distributions are from its unquantised base on the same text (mean KL
// divergence and top-1 agreement). The base may be the same file with another KV cache type
// (--kv-type q8 --kl-base SAME --kl-base-kv-type f16 measures what an int8 cache costs). The text is cut into windows of --ctx tokens, each starting with
// BOS; as in llama.cpp's perplexity tool, only the second half of each window is scored so every
// scored token has at least ctx/2 tokens of context.
#include <cmath>
#include <cstdio>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/model_flags.h"
#include "apps/progress.h"
#include "apps/text_file.h"
#include "core/error.h"
#include "engine/logprobs.h"
#include "gguf/gguf.h"
#include "model/sequence_runner.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

struct PerplexityOptions {
    std::string model, text_file, kl_base;
    std::string kv_type, kl_base_kv_type;  // empty: by model
    int ctx = 256, threads = 0, max_windows = 0;
    ModelFlags compute;
};

struct Mean {
    double sum = 0, sum_sq = 0;
    int64_t n = 0;
    void add(double v) { sum += v; sum_sq += v * v; ++n; }
    double mean() const { return n ? sum / double(n) : 0; }
    double stderr_of_mean() const {
        if (n < 2) return 0;
        double m = mean();
        return std::sqrt(std::max(0.0, sum_sq / double(n) - m * m) / double(n - 1));
    }
};

// log-softmax of one row, in double (engine::log_softmax_of's normaliser).
std::vector<double> log_softmax(const float* logits, int64_t n) {
    const engine::LogSoftmax norm = engine::log_softmax_of(logits, n);
    const double lz = norm.max + norm.log_sum;
    std::vector<double> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(logits[i]) - lz;
    return out;
}

int run_perplexity(const PerplexityOptions& o) {
    const std::string text_content = read_text_file(o.text_file, "text file");

    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model, o.compute.file_options(o.threads));
    auto tok = tokenizer::Tokenizer::from_gguf(*file);
    model::KvOptions kv{.prefix_caching = false};
    if (!o.kv_type.empty()) kv.dtype = kv::parse_kv_dtype(o.kv_type.c_str());
    auto model = model::open_step_model(file, o.compute.options(o.threads, kv, o.ctx, 0, 512));
    std::unique_ptr<model::StepModel> base;
    if (!o.kl_base_kv_type.empty() && o.kl_base.empty()) fail("--kl-base-kv-type needs --kl-base");
    if (!o.kl_base.empty()) {
        model::KvOptions base_kv{.prefix_caching = false};
        if (!o.kl_base_kv_type.empty()) base_kv.dtype = kv::parse_kv_dtype(o.kl_base_kv_type.c_str());
        base = model::open_step_model(o.kl_base, o.compute.options(o.threads, base_kv, o.ctx, 0, 512));
        if (base->info().vocab_size != model->info().vocab_size)
            fail("--kl-base has a vocabulary of {} tokens, the model {}", base->info().vocab_size,
                 model->info().vocab_size);
    }
    const int64_t vocab = model->info().vocab_size;
    std::vector<int32_t> text = tok->encode(text_content, {.add_bos = false, .add_eos = false});
    const int64_t body = o.ctx - 1;  // text tokens per window after BOS
    int64_t windows = int64_t(text.size()) / body;
    if (o.max_windows > 0) windows = std::min<int64_t>(windows, o.max_windows);
    if (windows < 1)
        fail("the text has {} tokens: too short for one window of --ctx {} (need at least {})", text.size(), o.ctx, body);

    model::SequenceRunner runner(*model, false);
    std::unique_ptr<model::SequenceRunner> base_runner;
    if (base) base_runner = std::make_unique<model::SequenceRunner>(*base, false);

    Progress progress("windows", size_t(windows));
    Mean nll, base_nll, kl;
    int64_t agree = 0;
    for (int64_t w = 0; w < windows; ++w) {
        std::vector<int32_t> ids = {tok->bos() >= 0 ? tok->bos() : text[size_t(w * body)]};
        ids.insert(ids.end(), text.begin() + w * body, text.begin() + (w + 1) * body);
        std::vector<float> logits = runner.prefill(w, ids, 512, true);
        runner.release(w);
        std::vector<float> base_logits;
        if (base_runner) {
            base_logits = base_runner->prefill(w, ids, 512, true);
            base_runner->release(w);
        }
        for (int64_t p = int64_t(ids.size()) / 2; p + 1 < int64_t(ids.size()); ++p) {
            const int32_t next = ids[size_t(p + 1)];
            auto lq = log_softmax(logits.data() + p * vocab, vocab);
            nll.add(-lq[size_t(next)]);
            if (base_runner) {
                auto lp = log_softmax(base_logits.data() + p * vocab, vocab);
                base_nll.add(-lp[size_t(next)]);
                double d = 0;
                for (int64_t i = 0; i < vocab; ++i) d += std::exp(lp[size_t(i)]) * (lp[size_t(i)] - lq[size_t(i)]);
                kl.add(d);
                agree += std::max_element(lp.begin(), lp.end()) - lp.begin() ==
                         std::max_element(lq.begin(), lq.end()) - lq.begin();
            }
        }
        progress.update(size_t(w + 1), fmt::format("running perplexity {:.4f}", std::exp(nll.mean())));
    }
    progress.finish();
    // Perplexity's error bar: exp(mean NLL) with the NLL mean's standard error carried through.
    const double ppl = std::exp(nll.mean());
    std::printf("model: %s, KV cache %s\n", o.model.c_str(), kv::kv_dtype_name(model->info().kv_layout.dtype));
    std::printf("text: %s, %zu tokens, %lld windows of %d, %lld scored\n", o.text_file.c_str(), text.size(),
                (long long)windows, o.ctx, (long long)nll.n);
    std::printf("perplexity: %.4f ± %.4f\n", ppl, ppl * nll.stderr_of_mean());
    if (base) {
        const double base_ppl = std::exp(base_nll.mean());
        std::printf("base: %s, KV cache %s, perplexity %.4f ± %.4f\n", o.kl_base.c_str(),
                    kv::kv_dtype_name(base->info().kv_layout.dtype), base_ppl, base_ppl * base_nll.stderr_of_mean());
        std::printf("mean KL divergence (base || model): %.6f ± %.6f\n", kl.mean(), kl.stderr_of_mean());
        std::printf("top-1 agreement: %.2f %%\n", 100.0 * double(agree) / double(kl.n));
    }
    return 0;
}

CommandRegistration reg("perplexity", "Perplexity on a text file; KL divergence against a base model",
                        [](CLI::App& sub) {
    auto o = std::make_shared<PerplexityOptions>();
    sub.add_option("-m,--model", o->model, model::kModelPathHelp)->required();
    sub.add_option("-f,--file", o->text_file, "UTF-8 text to score")->required();
    sub.add_option("-c,--ctx,--ctx-size", o->ctx, "Tokens per window (BOS included)")->check(in_range(4, 1 << 20));
    sub.add_option("--kl-base", o->kl_base, "Unquantised base model for KL divergence and top-1 agreement (may be the model itself "
                   "with another --kl-base-kv-type)");
    sub.add_option("--kv-type", o->kv_type, "KV element type of the model: f32, f16, bf16 or q8 (default: f32 for F32 models, else f16)")
        ->check(CLI::IsMember({"f32", "f16", "bf16", "q8"}));
    sub.add_option("--kl-base-kv-type", o->kl_base_kv_type, "KV element type of the --kl-base model (default: by that model)")
        ->check(CLI::IsMember({"f32", "f16", "bf16", "q8"}));
    sub.add_option("--max-windows", o->max_windows, "Score at most this many windows (0 = all)")->check(in_range(0, 1 << 30));
    add_threads_option(sub, o->threads);
    o->compute.add_to(sub);
    return [o] { return run_perplexity(*o); };
});

}  // namespace
}  // namespace pagoda::app
