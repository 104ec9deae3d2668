// `pagoda batch`: offline completions. Each line of the input is an OpenAI /v1/completions request
// body (plus an optional custom_id); every line's response object (or an error object for a line
// that is malformed or fails) is written to the output in input order. All requests run through
// one continuous-batching engine.
#include <unistd.h>

#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "apps/command.h"
#include "core/error.h"
#include "engine/completion_request.h"
#include "engine/engine.h"
#include "engine/model_step.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

using json = nlohmann::json;

struct BatchOptions {
    std::string model, input, output, kv_memory;
    int threads = 0, block_size = 16;
    int64_t max_batched_tokens = 2048, ctx = 0;
    int32_t max_seqs = 64;
    bool no_prefix_cache = false;
};

struct Line {
    std::optional<engine::CompletionRequest> request;
    json custom_id = nullptr;
    std::string error;
    std::unique_ptr<engine::CompletionAccumulator> result;
};

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void progress(size_t done, size_t total) {
    const int width = 40;
    const int filled = total ? int(double(done) / double(total) * width) : width;
    std::fprintf(stderr, "\r[%s%s] %zu/%zu", std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), ' ').c_str(), done, total);
    std::fflush(stderr);
}

int run_batch(const BatchOptions& o) {
    std::ifstream in(o.input);
    if (!in) fail("cannot open the input file '{}'", o.input);
    std::shared_ptr<model::Model> m(model::Model::load(o.model, {.n_threads = o.threads}));
    std::shared_ptr<const tokenizer::Tokenizer> tok(tokenizer::Tokenizer::from_gguf(m->file()));
    const std::string model_name = std::filesystem::path(o.model).stem().string();

    std::vector<Line> lines;
    std::string text;
    int64_t tokens_wanted = 0;
    while (std::getline(in, text)) {
        Line line;
        if (text.find_first_not_of(" \t\r") == std::string::npos) {
            line.error = "empty line";
        } else {
            try {
                json body = json::parse(text);
                if (body.is_object() && body.contains("custom_id")) line.custom_id = body["custom_id"];
                line.request = engine::parse_completion_request(body, tok.get());
                const auto& r = line.request->request;
                tokens_wanted += (int64_t(r.prompt.size()) + r.stop.max_tokens) * r.n;
            } catch (const json::exception& e) {
                line.error = fmt::format("malformed JSON: {}", e.what());
            } catch (const Error& e) {
                line.error = e.what();
            }
        }
        lines.push_back(std::move(line));
    }
    const int64_t ctx = o.ctx > 0 ? o.ctx : m->config().context_length;
    tokens_wanted = std::clamp<int64_t>(tokens_wanted, ctx, ctx * o.max_seqs);

    model::KvOptions kv{.block_size = o.block_size, .memory = o.kv_memory, .prefix_caching = !o.no_prefix_cache};
    engine::EngineOptions options;
    options.scheduler.max_batched_tokens = o.max_batched_tokens;
    options.scheduler.max_seqs = o.max_seqs;
    options.prefix_caching = !o.no_prefix_cache;
    engine::Engine eng(std::make_unique<engine::ModelStep>(m, kv, tokens_wanted, o.ctx), tok, options);

    std::mutex mutex;
    std::condition_variable cv;
    size_t done = 0, submitted = 0;
    for (auto& line : lines) {
        if (!line.request) continue;
        line.result = std::make_unique<engine::CompletionAccumulator>(line.request->request.n);
        try {
            engine::CompletionAccumulator* acc = line.result.get();
            eng.submit(line.request->request, [&, acc](const engine::Delta& d) {
                std::lock_guard lock(mutex);
                acc->add(d);
                if (d.request_done) {
                    ++done;
                    cv.notify_all();
                }
            });
            ++submitted;
        } catch (const Error& e) {
            line.error = e.what();
            line.result.reset();
        }
    }
    const bool tty = isatty(STDERR_FILENO);
    {
        std::unique_lock lock(mutex);
        while (done < submitted) {
            if (tty) progress(done, submitted);
            cv.wait_for(lock, std::chrono::milliseconds(200));
        }
        if (tty) {
            progress(done, submitted);
            std::fputc('\n', stderr);
        }
    }
    eng.shutdown(true);

    std::ofstream out(o.output);
    if (!out) fail("cannot create the output file '{}'", o.output);
    const int64_t created = int64_t(std::time(nullptr));
    size_t failures = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
        const Line& line = lines[i];
        json j;
        std::string error = line.error;
        if (error.empty() && line.result) error = line.result->error();
        if (!error.empty()) {
            j = engine::completion_error(error);
            ++failures;
        } else {
            std::string id = line.request->custom_id ? "cmpl-" + *line.request->custom_id : fmt::format("cmpl-{}", i + 1);
            j = engine::completion_response(id, created, line.request->model.empty() ? model_name : line.request->model,
                                            *line.result, line.request->request.logprobs, tok.get());
        }
        j["line"] = i + 1;
        if (!line.custom_id.is_null()) j["custom_id"] = line.custom_id;
        out << dump(j) << '\n';
    }
    if (!out) fail("writing '{}' failed", o.output);
    auto s = eng.stats();
    std::fprintf(stderr, "pagoda batch: %zu requests, %zu failed; %lld prompt + %lld generated tokens, %.0f%% prefix-cache hits, %lld preemptions\n",
                 lines.size(), failures, (long long)s.prompt_tokens, (long long)s.generation_tokens,
                 100.0 * s.prefix_hit_rate(), (long long)s.preemptions);
    return 0;  // per-line failures are reported in the output
}

CommandRegistration reg("batch", "Run a JSONL file of OpenAI completion requests through the engine", [](CLI::App& sub) {
    auto o = std::make_shared<BatchOptions>();
    sub.add_option("-m,--model", o->model, "GGUF model")->required()->check(CLI::ExistingFile);
    sub.add_option("-i,--input", o->input, "Requests, one JSON object per line")->required();
    sub.add_option("-o,--output", o->output, "Responses, one JSON object per line, in input order")->required();
    sub.add_option("-t,--threads", o->threads, "Compute threads (0: physical cores)")->check(CLI::Range(0, 1024));
    sub.add_option("--max-batched-tokens", o->max_batched_tokens, "Tokens per engine step")->check(CLI::Range(1, 1 << 20));
    sub.add_option("--max-seqs", o->max_seqs, "Sequences running at once")->check(CLI::Range(1, 4096));
    sub.add_option("--kv-memory", o->kv_memory, "KV cache budget: bytes (512MiB, 2G) or a fraction of free memory");
    sub.add_option("--block-size", o->block_size, "KV block size in tokens (power of two)")->check(CLI::Range(1, 256));
    sub.add_option("--ctx", o->ctx, "Context length override (0: the model's)")->check(CLI::Range(0, 1 << 24));
    sub.add_flag("--no-prefix-cache", o->no_prefix_cache, "Disable prefix caching");
    return [o] { return run_batch(*o); };
});

}  // namespace
}  // namespace pagoda::app
