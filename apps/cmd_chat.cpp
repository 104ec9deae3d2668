// `pagoda chat`: a conversation with one model, as llama.cpp's llama-cli conversation mode. Each
// line is a user turn; the whole history goes through the chat template and the reply streams to
// stdout as it is generated. Every turn re-renders the history, and the engine's prefix cache
// serves the KV of what earlier turns already computed, so a turn computes little more than its
// new text (--verbose shows the counts). On a terminal: a "> " prompt, a banner, Ctrl-C stops a
// reply, errors in a turn are reported and the conversation goes on. Off a terminal (a pipe or a
// file on stdin): one turn per line, only the replies on stdout, and an error ends the command
// with status 1, as a script wants.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "apps/chat_conversation.h"
#include "apps/cli.h"
#include "apps/command.h"
#include "apps/kv_flags.h"
#include "apps/prefix_tier_flags.h"
#include "apps/speculative_flags.h"
#include "apps/model_flags.h"
#include "apps/reply_printer.h"
#include "apps/sampling_flags.h"
#include "apps/text_file.h"
#include "chat/chat_template.h"
#include "chat/reasoning.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

constexpr int64_t kDefaultContext = 4096;

struct ChatOptions {
    SpeculativeFlags spec;
    std::string model, chat_template, system, reasoning = "show";
    std::string mmproj;  // Gemma 3's or Qwen3-VL's vision projector: /image PATH attaches images
    int64_t ctx = kDefaultContext;
    CLI::Option* ctx_option = nullptr;
    int n_predict = -1, threads = 0, chunk = 512;
    bool verbose = false;
    SamplingFlags sampling;
    KvFlags kv;
    PrefixTierFlags tier;
    ModelFlags compute;
};

const char* kCommandsHelp = "/exit (or Ctrl-D) quits, /clear starts a new conversation, /image PATH attaches an image "
                            "to your next message (with --mmproj), /help shows this";

// Set by SIGINT while a reply streams: the reply is cancelled, the session goes on.
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

// SIGINT stops the reply for as long as this lives; at the prompt Ctrl-C ends the program as usual.
class InterruptGuard {
public:
    explicit InterruptGuard(bool active) : active_(active) {
        if (!active_) return;
        g_interrupted.store(false);
        struct sigaction sa {};
        sa.sa_handler = on_interrupt;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_);
    }
    ~InterruptGuard() {
        if (active_) sigaction(SIGINT, &old_, nullptr);
    }

private:
    bool active_;
    struct sigaction old_ {};
};

// The template: --chat-template, else the model's own, else chatml (as `serve` chooses).
chat::ChatTemplate choose_template(const ChatOptions& o, const gguf::File& file) {
    if (!o.chat_template.empty()) return chat::ChatTemplate::from_name_or_file(o.chat_template);
    const std::string own = file.get_string_or("tokenizer.chat_template", "");
    if (!own.empty()) return chat::ChatTemplate::from_source(own, "gguf");
    log_warn("the model has no tokenizer.chat_template; using the builtin 'chatml' (choose another with --chat-template)");
    return chat::ChatTemplate::builtin("chatml");
}

// One user turn: a line, or several joined where a line ends with '\' (as llama-cli). nullopt at EOF.
std::optional<std::string> read_turn(bool interactive) {
    if (interactive) {
        std::fputs("> ", stdout);
        std::fflush(stdout);
    }
    std::string text, line;
    while (true) {
        if (!std::getline(std::cin, line)) {
            if (text.empty()) return std::nullopt;
            return text;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty() && line.back() == '\\') {
            line.pop_back();
            text += line + "\n";
            continue;
        }
        return text + line;
    }
}

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

int chat(ChatOptions& o) {
    const engine::SamplingParams sampling = o.sampling.params();
    sampling.validate();
    std::optional<chat::ChatTemplate> early;  // a bad template fails before the model loads
    if (!o.chat_template.empty()) early = chat::ChatTemplate::from_name_or_file(o.chat_template);

    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model, o.compute.file_options(o.threads));
    std::shared_ptr<const tokenizer::Tokenizer> tok = tokenizer::Tokenizer::from_gguf(*file);
    const chat::ChatTemplate tmpl = early ? *early : choose_template(o, *file);
    const bool split_reasoning = o.reasoning != "raw" && chat::template_thinks(tmpl.source());

    const model::ModelConfig cfg = model::read_config(*file);
    int64_t context = o.ctx > 0 ? o.ctx : cfg.context_length;
    if (o.ctx_option->count() == 0) context = std::min(context, cfg.context_length);  // the default fits the model
    if (context > cfg.context_length)
        log_warn("-c/--ctx-size {} exceeds the model's trained context of {} tokens", context, cfg.context_length);

    engine::EngineOptions eo;
    eo.scheduler.max_seqs = 1;
    eo.scheduler.max_batched_tokens = o.chunk;
    eo.prefix_caching = o.kv.options().prefix_caching;
    eo.prefix_tier = o.tier.options(eo.prefix_caching);
    eo.state_snapshots = o.kv.state_snapshots;
    eo.max_context = context;
    model::StepModelOptions model_options = o.compute.options(o.threads, o.kv.options(), context, context, o.chunk);
    model_options.state_slots = 1 + (eo.prefix_caching ? eo.state_snapshots : 0);  // recurrent models only
    auto target = model::open_step_model(file, model_options);
    eo.speculative = o.spec.resolve(*tok, *target, model_options);
    if (!o.mmproj.empty() && !target->info().image_input)
        fail("--mmproj {}: this model ({}) takes no image input (Gemma 3 and Qwen3-VL do)", o.mmproj, cfg.arch);
    eo.scheduler.max_image_tokens = o.chunk;  // an image runs whole in one step of --chunk tokens
    std::unique_ptr<server::ImageInput> image_input;
    if (!o.mmproj.empty())
        image_input = std::make_unique<server::ImageInput>(o.mmproj, o.compute.tower_backend(), o.threads, *tok, target->info());
    engine::Engine eng(std::move(target), tok, eo);
    const int64_t limit = eng.context_limit();

    const bool interactive = isatty(STDIN_FILENO) == 1, terminal_out = isatty(STDOUT_FILENO) == 1;
    if (interactive)
        std::fprintf(stderr, "pagoda chat: %s, template '%s', context %lld tokens. %s\n", cfg.describe().c_str(),
                     tmpl.name().c_str(), (long long)limit, kCommandsHelp);
    // In a session a failed turn is reported and dropped; in a script it ends the command.
    auto turn_error = [&](const std::string& message) {
        if (!interactive) fail("{}", message);
        std::fprintf(stderr, "pagoda chat: %s\n", message.c_str());
    };

    Conversation conversation(o.system);
    std::vector<vision::EncodedImage> pending;  // /image: attached to the next user message
    int turn = 0;
    while (true) {
        std::optional<std::string> input = read_turn(interactive);
        if (!input) {
            if (interactive) std::fputc('\n', stdout);
            break;
        }
        const std::string command = trim(*input);
        if (command.empty()) continue;
        if (command == "/exit") break;
        if (command == "/help") {
            std::fprintf(stderr, "pagoda chat: %s; a line ending in '\\' continues on the next line\n", kCommandsHelp);
            continue;
        }
        if (command.rfind("/image", 0) == 0 && (command.size() == 6 || command[6] == ' ')) {
            const std::string path = trim(command.substr(6));
            try {
                if (!image_input) fail("/image needs --mmproj (the model's vision projector)");
                if (path.empty()) fail("/image needs a file: /image PATH");
                const std::string bytes = read_text_file(path, "image");
                pending.push_back(image_input->encode_bytes(
                    std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), path, o.chunk));
                if (interactive) std::fprintf(stderr, "pagoda chat: image attached to your next message\n");
            } catch (const std::exception& e) {
                turn_error(e.what());
            }
            continue;
        }
        if (command == "/clear") {
            pending.clear();
            conversation.clear();
            if (interactive) std::fprintf(stderr, "pagoda chat: history cleared\n");
            continue;
        }

        try {
            conversation.add_user(*input, std::move(pending), tmpl.takes_content_parts(),
                                  image_input ? image_input->marker() : std::string(server::kImageMarker));
        } catch (const Error& e) {
            pending.clear();  // moved into the refused message
            turn_error(fmt::format("{}; the images are dropped, attach them again", e.what()));
            continue;
        }
        pending.clear();
        ChatPrompt prompt;
        try {
            prompt = conversation.render(tmpl, *tok, image_input.get());
        } catch (const server::ApiError& e) {
            conversation.drop_last();
            turn_error(e.what());
            continue;
        } catch (const Error& e) {
            conversation.drop_last();
            turn_error(fmt::format("the chat template rejected the conversation: {}", e.what()));
            continue;
        }
        const int64_t n_prompt = int64_t(prompt.ids.size());
        if (n_prompt + 1 > limit) {
            conversation.drop_last();
            turn_error(fmt::format("this message makes the conversation {} tokens, more than the context of {} leaves "
                                   "room for (a reply needs at least one): /clear starts a new conversation, -c/--ctx-size "
                                   "gives a larger context",
                                   n_prompt, limit));
            continue;
        }
        ++turn;
        if (o.verbose) std::fprintf(stderr, "pagoda chat: turn %d prompt:\n%s\n", turn, prompt.text.c_str());

        engine::Request request;
        request.prompt = prompt.ids;
        request.images = std::move(prompt.images);
        request.sampling = sampling;
        const int64_t room = limit - n_prompt;
        request.stop.max_tokens = o.n_predict < 0 ? room : std::min<int64_t>(o.n_predict, room);

        ReplyPrinter printer(split_reasoning, prompt.opens_thinking, o.reasoning == "show", terminal_out,
                             chat::template_reasoning_format(tmpl.source()));
        engine::Delta last;
        {
            InterruptGuard guard(interactive);
            engine::RequestHandle handle = eng.submit(std::move(request));
            bool cancelled = false;
            while (true) {
                if (g_interrupted.load() && !cancelled) {
                    eng.cancel(handle.id());
                    cancelled = true;
                }
                std::optional<engine::Delta> d = handle.next(std::chrono::milliseconds(50));
                if (!d) continue;
                printer.feed(d->text);
                if (d->request_done) {
                    last = std::move(*d);
                    break;
                }
            }
        }
        printer.finish();
        conversation.add("assistant", printer.content());

        const engine::Usage& usage = last.usage;
        const auto reason = last.finish_reason.value_or(engine::FinishReason::stop);
        if (reason == engine::FinishReason::error) {
            conversation.drop_last();
            conversation.drop_last();
            turn_error(fmt::format("the reply failed: {}", last.error));
            continue;
        }
        if (reason == engine::FinishReason::cancelled) std::fprintf(stderr, "pagoda chat: reply interrupted\n");
        if (reason == engine::FinishReason::length && usage.prompt_tokens + usage.completion_tokens >= limit)
            std::fprintf(stderr, "pagoda chat: the context of %lld tokens is full: /clear starts a new conversation\n",
                         (long long)limit);
        if (o.verbose) {
            const double gen_s = last.timings.ttft >= 0 ? last.timings.e2e - last.timings.ttft : 0;
            std::fprintf(stderr,
                         "pagoda chat: turn %d: prompt %lld tokens (%lld cached), reply %lld tokens (%s), %.1f tokens/s\n",
                         turn, (long long)usage.prompt_tokens, (long long)usage.cached_prompt_tokens,
                         (long long)usage.completion_tokens, engine::finish_reason_name(reason),
                         usage.completion_tokens > 1 && gen_s > 0 ? double(usage.completion_tokens - 1) / gen_s : 0.0);
        }
    }
    eng.shutdown(false);
    return 0;
}

CommandRegistration reg("chat", "Chat with a model in the terminal (its chat template, streaming, history)", [](CLI::App& sub) {
    auto o = std::make_shared<ChatOptions>();
    sub.footer(std::string("In the chat: ") + kCommandsHelp +
               "; Ctrl-C stops a reply. With stdin not a terminal, each line is one turn and only the replies are "
               "printed.");
    sub.add_option("-m,--model", o->model, model::kModelPathHelp)->required();
    sub.add_option("--chat-template", o->chat_template,
                   "Chat template: a builtin name (" + fmt::format("{}", fmt::join(chat::ChatTemplate::builtin_names(), ", ")) +
                       ") or a Jinja file (default: the model's, else chatml)");
    sub.add_option("--mmproj", o->mmproj,
                   "Gemma 3's or Qwen3-VL's vision projector (llama.cpp's mmproj GGUF): /image PATH attaches an image to the next "
                   "message");
    sub.add_option("--system,--system-prompt", o->system, "-sys: system message opening the conversation (empty: none)");
    sub.add_option("-n,--n-predict", o->n_predict,
                   "New tokens per reply at most; -1: until the model ends its turn or the context is full")
        ->check(in_range(-1, 1 << 24));
    o->ctx_option = sub.add_option("-c,--ctx-size", o->ctx,
                                   "Context of the whole conversation: history + reply at most (0: the model's trained "
                                   "context; the default is capped at the trained context)")
                        ->check(in_range(int64_t(0), int64_t(1) << 24));
    o->sampling.add_to(sub);
    sub.add_option("--reasoning", o->reasoning,
                   "With a template that thinks (<think>...</think>): show the reasoning apart from the answer (dim on a "
                   "terminal, between <think> lines elsewhere), hide it, or raw (printed and kept as the model wrote it)")
        ->check(CLI::IsMember({"show", "hide", "raw"}));
    sub.add_flag("-v,--verbose", o->verbose,
                 "Print each turn's rendered prompt and its token counts (prompt, served from the prefix cache, reply) "
                 "on stderr");
    add_threads_option(sub, o->threads);
    sub.add_option("--chunk", o->chunk, "Prompt tokens per forward step")->check(in_range(1, 1 << 20));
    o->kv.add_to(sub);
    o->tier.add_to(sub);
    o->spec.add_to(sub);
    o->compute.add_to(sub);
    o->compute.add_mmproj_backend_to(sub);
    return [o] { return chat(*o); };
});

}  // namespace
}  // namespace pagoda::app
