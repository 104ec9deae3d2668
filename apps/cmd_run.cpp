// `pagoda run`: generate text from a prompt with one model, streaming the continuation to stdout.
// Plain decoding runs the model directly (model::SequenceRunner); with speculative decoding
// (--draft-ngram / --draft-model) the one request goes through the engine, which drafts and verifies.
// With --mmproj and --image (Gemma 3, Gemma 4, Qwen3-VL), each image is encoded by the projector's vision tower
// and laid out as the model's processor expands it, where the prompt's i-th <__media__> marker stands
// (llama.cpp's; one marker per image) or, without markers, after BOS before the text: Gemma 3's
// "\n\n<start_of_image>", its soft tokens, "<end_of_image>\n\n"; Gemma 4's <|image>, one <|image|> per
// pooled token, <image|>; Qwen3-VL's <|vision_start|>, one
// <|image_pad|> per merged token, <|vision_end|>, with the image's grid for M-RoPE. Its rows take the
// image's embeddings (plain decoding only).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/kv_flags.h"
#include "apps/profile_flags.h"
#include "apps/lora_flags.h"
#include "apps/model_flags.h"
#include "apps/sampling_flags.h"
#include "apps/speculative_flags.h"
#include "apps/text_file.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine_core.h"
#include "engine/sampler.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"
#include "model/model_file.h"
#include "tokenizer/stream_decoder.h"
#include "server/image_parts.h"
#include "vision/image_encoder.h"
#include "vision/qwen3vl_layout.h"

namespace pagoda::app {
namespace {

struct RunOptions {
    std::string model, prompt, prompt_file, mmproj;
    std::vector<std::string> images;
    int64_t ctx = 0;
    int n_predict = 128, threads = 0, chunk = 512;
    bool ids = false, ignore_eos = false;
    SamplingFlags sampling;
    SpeculativeFlags spec;
    KvFlags kv;
    ProfileFlags profile;
    ModelFlags compute;
    LoraFlags lora;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// How many new tokens fit: the prompt and the output share the context, except that the last token
// sampled is printed without being stored. -n -1 asks for all of them.
struct GenerationBudget {
    int64_t context = 0, tokens = 0;
    bool capped = false;  // -n asked for more than the context holds
};

GenerationBudget generation_budget(int64_t prompt_tokens, int64_t n_predict, int64_t context) {
    if (prompt_tokens > context)
        fail("the prompt has {} tokens, more than the context of {} (raise -c/--ctx-size)", prompt_tokens, context);
    const int64_t room = context - prompt_tokens + 1;
    return {.context = context, .tokens = n_predict < 0 ? room : std::min(n_predict, room), .capped = n_predict > room};
}

// One control token's id, or a clear refusal naming `who` when the vocabulary lacks it.
int32_t control_token(const tokenizer::Tokenizer& t, const std::string& text, const char* who) {
    const auto ids = t.encode(text, {.add_bos = false, .add_eos = false, .parse_special = true});
    if (ids.size() != 1 || t.token_to_piece(ids[0], true) != text)
        fail("the model's vocabulary has no {} token, which {} image prompts need", text, who);
    return ids[0];
}

// BOS, then the images in the model's layout: image i where the text's i-th <__media__> marker
// stands (the text between them tokenized as text, without BOS), or, with no marker, all images
// before the text; the images' spans for the runner.
std::vector<int32_t> image_prompt(const RunOptions& o, const std::string& text, const tokenizer::Tokenizer& t,
                                  const model::ModelConfig& config, std::vector<model::ImageSpan>& spans) {
    const bool qwen = config.arch == "qwen3vl", gemma4 = config.arch == "gemma4";
    if (config.arch != "gemma3" && !qwen && !gemma4)
        fail("--image: images are read for Gemma 3, Gemma 4 and Qwen3-VL models only (this one is {})", config.arch);
    std::vector<std::string_view> pieces = server::media_pieces(text);
    if (pieces.size() == 1)  // no marker: the images first, as many empty pieces before the text
        pieces.insert(pieces.begin(), o.images.size(), std::string_view());
    else if (pieces.size() - 1 != o.images.size())
        fail("the prompt holds {} {} markers for {} --image files: give one image per marker (or no marker, to put "
             "the images before the text)",
             pieces.size() - 1, server::kMediaMarker, o.images.size());
    // The tower runs on the model's backend (Vulkan included) unless --mmproj-backend says otherwise.
    vision::ImageEncoder encoder(o.mmproj, o.compute.tower_backend(), o.threads);
    const vision::VisionConfig& vc = encoder.config();
    if (vc.qwen3vl() != qwen || vc.gemma4v() != gemma4)
        fail("{}: a {} projector is not for this {} model", o.mmproj, vc.projector, config.arch);
    if (vc.text_dim != config.dim)
        fail("{}: the projector's output width {} is not the text model's {}", o.mmproj, vc.text_dim, config.dim);
    if (vc.token_width() != config.input_embedding_width())
        fail("{}: the projector's {} deep-stack mergers do not feed this model's {}-wide image rows", o.mmproj,
             vc.deepstack_layers.size(), config.input_embedding_width());
    vision::Gemma3ImageTokens gemma;
    vision::Qwen3VlImageTokens qwen_ids;
    if (qwen) {
        qwen_ids.start = control_token(t, "<|vision_start|>", "Qwen3-VL's");
        qwen_ids.end = control_token(t, "<|vision_end|>", "Qwen3-VL's");
        qwen_ids.pad = control_token(t, "<|image_pad|>", "Qwen3-VL's");
    } else if (gemma4) {
        gemma.start = control_token(t, "<|image>", "Gemma 4's");
        gemma.end = control_token(t, "<image|>", "Gemma 4's");
        gemma.soft = control_token(t, "<|image|>", "Gemma 4's");
    } else {
        gemma.double_newline = t.encode("\n\n", {.add_bos = false, .add_eos = false});
        gemma.start = control_token(t, "<start_of_image>", "Gemma 3's");
        gemma.end = control_token(t, "<end_of_image>", "Gemma 3's");
        gemma.soft = control_token(t, "<image_soft_token>", "Gemma 3's");
    }
    std::vector<int32_t> prompt = t.encode("");  // BOS where the vocabulary adds it
    const auto append_text = [&](std::string_view piece, bool last) {
        const auto ids = t.encode(piece, {.add_bos = false, .add_eos = last ? std::nullopt : std::optional(false)});
        prompt.insert(prompt.end(), ids.begin(), ids.end());
    };
    for (size_t i = 0; i < o.images.size(); ++i) {
        append_text(pieces[i], false);
        const std::string& path = o.images[i];
        vision::EncodedImage image = encoder.encode_file(path);
        const int64_t rows = image.tokens();
        // Qwen3-VL's rows take M-RoPE positions from the grid (SequenceRunner); Gemma's need none.
        const int64_t begin = qwen     ? vision::append_qwen3vl_image(prompt, qwen_ids, rows)
                              : gemma4 ? vision::append_gemma4_image(prompt, gemma, rows)
                                       : vision::append_gemma3_image(prompt, gemma, rows);
        model::ImageSpan span{.begin = begin, .rows = rows, .embeddings = std::move(image.embeddings), .hash = image.hash};
        if (qwen) {
            span.grid_h = image.grid_h;
            span.grid_w = image.grid_w;
        }
        spans.push_back(std::move(span));
    }
    append_text(pieces.back(), true);
    return prompt;
}

std::string prompt_text(const RunOptions& o) {
    return o.prompt_file.empty() ? o.prompt : read_text_file(o.prompt_file, "prompt file (-f)");
}

void print_tokens(const RunOptions& o, const std::vector<int32_t>& ids, const std::string& text, bool& first) {
    if (o.ids) {
        for (int32_t id : ids) {
            std::printf(first ? "%d" : " %d", id);
            first = false;
        }
    } else {
        std::fwrite(text.data(), 1, text.size(), stdout);
        first = first && ids.empty();
    }
    std::fflush(stdout);
}

// The speculative path: one request through EngineCore on this thread. The engine stores every
// token it samples, so it stops one token short of the plain path's budget when the context fills.
int run_speculative(const RunOptions& o, const std::vector<int32_t>& prompt, std::unique_ptr<model::StepModel> model,
                    const model::StepModelOptions& model_options, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                    const GenerationBudget& budget, double load_s, const lora::AdapterRef& adapter) {
    engine::EngineOptions eo;
    eo.scheduler.max_seqs = 1;
    eo.scheduler.max_batched_tokens = o.chunk;
    eo.prefix_caching = o.kv.options().prefix_caching;
    eo.max_context = budget.context;
    eo.speculative = o.spec.resolve(*tokenizer, *model, model_options);
    engine::EngineCore core(*model, tokenizer, eo);
    engine::Request request;
    request.prompt = prompt;
    request.lora = adapter;
    request.sampling = o.sampling.params();
    request.stop.ignore_eos = o.ignore_eos;
    request.stop.max_tokens = std::max<int64_t>(1, std::min(budget.tokens, core.context_limit() - int64_t(prompt.size())));
    if (int64_t(prompt.size()) >= core.context_limit())
        fail("the prompt has {} tokens: no room is left in the context of {} to generate", prompt.size(),
             core.context_limit());
    core.validate(request);
    bool first = true, done = false;
    // The engine decodes a continuation, keeping its first space; after a prompt with no text (BOS
    // only) the output starts the document, where SentencePiece drops it — as the plain path does.
    bool strip_space = tokenizer->strips_leading_space() && tokenizer->decode(prompt).empty();
    engine::Delta last;
    core.add(1, std::move(request), nullptr, [&](const engine::Delta& d) {
        std::string_view text = d.text;
        if (strip_space && !text.empty()) {
            if (text.front() == ' ') text.remove_prefix(1);
            strip_space = false;
        }
        print_tokens(o, d.token_ids, std::string(text), first);
        if (d.request_done) {
            done = true;
            last = d;
        }
    });
    const auto start = Clock::now();
    while (!done && core.step()) {
    }
    if (!done) fail("the engine stopped before the request finished");
    if (!last.error.empty()) fail("generation failed: {}", last.error);
    std::printf("\n");
    std::fflush(stdout);
    const double total_s = seconds_since(start);
    const double prompt_s = std::max(0.0, last.timings.ttft), gen_s = std::max(0.0, total_s - prompt_s);
    const int64_t generated = last.usage.completion_tokens, cached = last.usage.cached_prompt_tokens;
    const int64_t computed = int64_t(prompt.size()) - cached;
    const engine::EngineStats stats = core.stats();
    std::fprintf(stderr,
                 "pagoda run: load %.2f s | prompt %zu tokens (%lld cached) %.2f s, %.1f tokens/s | "
                 "generation %lld tokens %.2f s, %.1f tokens/s | speculation: %lld drafted, %lld accepted (%.0f%%), "
                 "%.2f tokens per step\n",
                 load_s, prompt.size(), (long long)cached, prompt_s, computed > 0 && prompt_s > 0 ? double(computed) / prompt_s : 0.0,
                 (long long)generated, gen_s, generated > 1 && gen_s > 0 ? double(generated - 1) / gen_s : 0.0,
                 (long long)stats.draft_tokens, (long long)stats.accepted_draft_tokens,
                 stats.draft_tokens ? 100.0 * double(stats.accepted_draft_tokens) / double(stats.draft_tokens) : 0.0,
                 stats.steps > 1 ? double(generated - 1) / double(stats.steps - 1) : 0.0);
    return 0;
}

int run(const RunOptions& o) {
    engine::Sampler sampler(o.sampling.params());  // validates the sampling flags before the model loads

    const auto load_start = Clock::now();
    const std::string text = prompt_text(o);
    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model, o.compute.file_options(o.threads));
    auto tokenizer = tokenizer::Tokenizer::from_gguf(*file);
    if (!o.images.empty() && o.mmproj.empty()) fail("--image needs --mmproj (the model's vision projector)");
    if (!o.images.empty() && o.spec.enabled()) fail("--image is for plain decoding: not with --draft-ngram / --draft-model");
    std::vector<model::ImageSpan> images;
    std::vector<int32_t> prompt = o.images.empty() ? tokenizer->encode(text)
                                                   : image_prompt(o, text, *tokenizer, model::read_config(*file), images);
    if (prompt.empty()) fail("the prompt encodes to no tokens and the vocabulary adds no BOS: give a prompt with -p");
    const int64_t trained = model::read_config(*file).context_length;
    if (o.ctx > trained)
        log_warn("-c/--ctx-size {} exceeds the model's trained context of {} tokens", o.ctx, trained);
    const GenerationBudget budget = generation_budget(int64_t(prompt.size()), o.n_predict, o.ctx > 0 ? o.ctx : trained);
    model::StepModelOptions model_options = o.compute.options(
        o.threads, o.kv.options(), int64_t(prompt.size()) + budget.tokens, budget.context, o.chunk);
    model_options.lora = o.lora.any();
    model_options.lora_storage = o.lora.storage(o.lora.any());
    if (o.lora.specs().size() > 1) fail("run applies one LoRA adapter; give one --lora (serve and batch take several)");
    auto model = model::open_step_model(file, model_options);
    lora::AdapterRef adapter;
    if (o.lora.any()) {
        auto loaded = o.lora.load(*model);
        adapter = {loaded[0], loaded[0]->scale};
        log_info("LoRA adapter '{}': {} weights, {:.1f} MiB, scale {}", adapter.adapter->name, adapter.adapter->pairs.size(),
                 double(adapter.adapter->bytes()) / (1 << 20), adapter.scale);
    }
    const double load_s = seconds_since(load_start);
    const auto& cfg = model->info().config;
    log_info("model: {}", cfg.describe());
    if (o.spec.enabled())
        return run_speculative(o, prompt, std::move(model), model_options, std::move(tokenizer), budget, load_s, adapter);
    model::SequenceRunner runner(*model, o.kv.options().prefix_caching);
    if (adapter) runner.set_lora(0, adapter);
    if (!images.empty()) runner.set_images(0, std::move(images));

    tokenizer::StreamDecoder stream(*tokenizer);
    for (int32_t id : prompt) stream.feed(id);  // the continuation is decoded in context (leading spaces)

    const auto prompt_start = Clock::now();
    std::vector<float> logits = runner.prefill(0, prompt, o.chunk);
    const double prompt_s = seconds_since(prompt_start);

    std::vector<int32_t> history = prompt;
    const auto gen_start = Clock::now();
    int generated = 0;
    bool first = true;
    while (generated < budget.tokens) {
        // Keyed by position, as in the engine: `run` and `serve` draw the same tokens for a seed.
        int32_t next = sampler.sample(logits.data(), cfg.vocab_size, history, int64_t(history.size()));
        if (!o.ignore_eos && (tokenizer->is_eog(next) || next == tokenizer->bos())) break;
        history.push_back(next);
        ++generated;
        if (o.ids) {
            std::printf(first ? "%d" : " %d", next);
        } else {
            std::string text = stream.feed(next);
            std::fwrite(text.data(), 1, text.size(), stdout);
        }
        std::fflush(stdout);
        first = false;
        if (generated == budget.tokens) break;
        logits = runner.decode(0, next);
    }
    if (!o.ids) {
        std::string rest = stream.flush();
        std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    std::printf("\n");
    std::fflush(stdout);
    const double gen_s = seconds_since(gen_start);
    if (budget.capped && generated == budget.tokens)
        std::fprintf(stderr, "pagoda run: stopped after %d tokens: the context of %lld tokens is full\n", generated,
                     (long long)budget.context);
    const int64_t computed = int64_t(prompt.size()) - runner.last_cached_tokens();
    std::fprintf(stderr,
                 "pagoda run: load %.2f s | prompt %zu tokens (%lld cached) %.2f s, %.1f tokens/s | "
                 "generation %d tokens %.2f s, %.1f tokens/s\n",
                 load_s, prompt.size(), (long long)runner.last_cached_tokens(), prompt_s,
                 computed > 0 && prompt_s > 0 ? double(computed) / prompt_s : 0.0, generated, gen_s,
                 generated > 1 && gen_s > 0 ? double(generated) / gen_s : 0.0);
    return 0;
}

CommandRegistration reg("run", "Generate text from a prompt", [](CLI::App& sub) {
    auto o = std::make_shared<RunOptions>();
    sub.add_option("-m,--model", o->model, model::kModelPathHelp)->required();
    auto* prompt = sub.add_option("-p,--prompt", o->prompt, "Prompt text (empty: BOS only)");
    sub.add_option("-f,--file", o->prompt_file, "Read the prompt from this file")->excludes(prompt);
    sub.add_option("-n,--n-predict", o->n_predict, "New tokens at most; -1: until end of sequence or the context is full")
        ->check(in_range(-1, 1 << 24));
    sub.add_option("-c,--ctx-size", o->ctx, "Context: prompt + new tokens at most (0: the model's trained context)")
        ->check(in_range(int64_t(0), int64_t(1) << 24));
    o->sampling.add_to(sub);
    add_threads_option(sub, o->threads);
    sub.add_option("--chunk", o->chunk, "Prompt tokens per forward step")->check(in_range(1, 1 << 20));
    sub.add_flag("--ids", o->ids, "Print generated token ids instead of text");
    sub.add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-sequence tokens (benchmarks)");
    o->spec.add_to(sub);
    o->kv.add_to(sub);
    o->profile.add_to(sub);
    o->compute.add_to(sub);
    o->compute.add_mmproj_backend_to(sub);
    o->lora.add_to(sub);
    sub.add_option("--mmproj", o->mmproj, "The model's vision projector (llama.cpp's mmproj GGUF; Gemma 3 or Qwen3-VL)");
    sub.add_option("--image", o->images,
                   "An image (PNG, JPEG, WebP), repeatable: the i-th goes where the prompt's i-th <__media__> marker "
                   "stands (one marker per image), or with no marker before the prompt text")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    return [o] {
        o->profile.apply(o->model, o->compute, &o->threads, &o->kv.block_size);
        return run(*o);
    };
});

}  // namespace
}  // namespace pagoda::app
