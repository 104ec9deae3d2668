#include "apps/serve_loader.h"

#include <algorithm>
#include <fmt/format.h>

#include "apps/draft_model_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "model/classifier_head.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/system_fingerprint.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {

server::LoadedModel load_serve_model(const ServeModelOptions& options, engine::EngineOptions engine_options) {
    std::shared_ptr<const gguf::File> file = model::open_model_file(options.path, {.quantize = options.quantize, .threads = options.threads, .tokenizer = true});
    std::shared_ptr<const tokenizer::Tokenizer> tok = tokenizer::Tokenizer::from_gguf(*file);
    const model::ModelConfig cfg = model::read_config(*file);
    // Without --kv-memory: one full context (-c, else the trained one), or 256 tokens for each
    // sequence that may run, whichever is more (production deployments size it with --kv-memory).
    if (options.max_context > cfg.context_length)
        log_warn("-c/--ctx-size {} exceeds the model's trained context of {} tokens", options.max_context,
                 cfg.context_length);
    const int64_t context = options.max_context > 0 ? options.max_context : cfg.context_length;
    const int64_t tokens_wanted = std::max<int64_t>(context, int64_t(engine_options.scheduler.max_seqs) * 256);
    const model::StepModelOptions model_options{.backend = options.backend, .threads = options.threads, .kv = options.kv,
                                                .tokens_wanted = tokens_wanted, .max_context = options.max_context,
                                                .max_step_tokens = engine_options.scheduler.max_batched_tokens,
                                                .fusion = options.fusion, .lora = options.lora(),
                                                .lora_storage = options.lora_storage,
                                                .state_slots = engine_options.scheduler.max_seqs +
                                                               (options.kv.prefix_caching ? options.state_snapshots : 0)};
    auto step = model::open_step_model(file, model_options);
    if (!options.draft_model.empty()) {
        engine_options.speculative.draft_model =
            open_draft_model(options.draft_model, *tok, *step, model_options, options.draft_profile);
        engine_options.speculative.draft_max_step_tokens = model_options.max_step_tokens;
    }
    std::shared_ptr<server::LoraRegistry> loras;
    if (options.lora()) {
        // The engine owns the model from here on and outlives every request that loads through it.
        model::StepModel* model = step.get();
        auto loader = [model](const std::string& path, const std::string& name, float scale) {
            return model->load_lora(path, name, scale);
        };
        loras = std::make_shared<server::LoraRegistry>(loader, options.max_loras, options.allow_runtime_lora);
        for (const auto& spec : options.loras) {
            try {
                loras->add(step->load_lora(spec.path, spec.name, spec.scale));
            } catch (const Error& e) {
                fail("the LoRA adapter '{}' ({}) does not fit the base model {}: {}", spec.name, spec.path, options.path,
                     e.what());
            }
        }
    }
    engine_options.prefix_caching = options.kv.prefix_caching;
    engine_options.state_snapshots = options.state_snapshots;
    engine_options.prefix_tier = options.prefix_tier;
    server::LoadedModel loaded;
    loaded.engine = std::make_unique<engine::Engine>(std::move(step), tok, std::move(engine_options));
    loaded.chat_template = file->get_string_or("tokenizer.chat_template", "");
    loaded.description = cfg.describe();
    loaded.system_fingerprint = model::system_fingerprint(model::fingerprint_parts(loaded.engine->model_info()));
    // llama.cpp's convention for embedding models; 0 (none) and 4 (rank) leave the server's default.
    loaded.pooling = engine::pooling_from_gguf(file->get_int_or(cfg.arch + ".pooling_type", 0));
    // Rerankers: a decoder's rerank prompt form (llama.cpp's key), or a classification head (rank;
    // a head that cannot be applied fails the load).
    loaded.rerank_template = file->get_string_or("tokenizer.chat_template.rerank", "");
    if (auto head = model::ClassifierHead::from_gguf(*file, cfg.arch, loaded.engine->model_info().hidden_size)) {
        loaded.classifier_head = std::make_shared<const model::ClassifierHead>(std::move(*head));
        loaded.description += ", reranker (" + loaded.classifier_head->describe() + ")";
    }
    loaded.add_sep = file->get_bool_or("tokenizer.ggml.add_sep_token", false);
    loaded.loras = std::move(loras);
    if (!options.mmproj.empty()) {
        if (!loaded.engine->model_info().image_input)
            fail("--mmproj {}: this model ({}) takes no image input (Gemma 3 and Qwen3-VL do)", options.mmproj, cfg.arch);
        // The tower runs on the model's backend (Vulkan included) unless --mmproj-backend says otherwise.
        const std::string& tower = options.mmproj_backend.empty() ? options.backend : options.mmproj_backend;
        loaded.images = std::make_shared<server::ImageInput>(options.mmproj, tower, options.threads, *tok,
                                                             loaded.engine->model_info(),
                                                             uint64_t(options.image_cache_mb) << 20);
        const std::string tokens = loaded.images->tokens_per_image() == 0
                                       ? std::string("tokens by size")
                                       : fmt::format("{} tokens each", loaded.images->tokens_per_image());
        loaded.description += fmt::format(", images ({}, {}; encoded-image cache {} MiB)", tokens, options.mmproj,
                                          options.image_cache_mb);
    }
    return loaded;
}

}  // namespace pagoda::app
