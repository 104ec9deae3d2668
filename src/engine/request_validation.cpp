#include "engine/request_validation.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/token_scores.h"

namespace pagoda::engine {

namespace {

void validate_images(const Request& req, const model::StepModelInfo& info) {
    if (req.images.empty()) return;
    if (!info.image_input)
        fail("this model ({}) takes no images", info.config.name.empty() ? info.config.arch : info.config.name);
    if (req.embedding) fail("an embedding request takes no images");
    int64_t after = 0;
    for (size_t i = 0; i < req.images.size(); ++i) {
        const PromptImage& image = req.images[i];
        if (image.rows < 1 || image.begin < after || image.begin + image.rows > int64_t(req.prompt.size()))
            fail("image {} at prompt positions {}..{} is empty, outside the prompt of {} tokens or overlaps the one "
                 "before", i, image.begin, image.begin + image.rows, req.prompt.size());
        const int64_t width = info.config.input_embedding_width();
        if (int64_t(image.embeddings.size()) != image.rows * width)
            fail("image {} has {} embedding values, not {} rows of the model's width {}", i, image.embeddings.size(),
                 image.rows, width);
        // An M-RoPE model places an image's rows by its grid; any other model has no use for one.
        if (info.mrope && (image.grid_h < 1 || image.grid_w < 1 || image.grid_h * image.grid_w != image.rows))
            fail("image {} of {} rows needs its merged grid (grid_h x grid_w = rows) for this model's M-RoPE, got {} x {}",
                 i, image.rows, image.grid_h, image.grid_w);
        if (!info.mrope && (image.grid_h != 0 || image.grid_w != 0))
            fail("image {} has a {} x {} grid, but this model ({}) has no M-RoPE to place it by", i, image.grid_h,
                 image.grid_w, info.config.arch);
        after = image.begin + image.rows;
    }
}

}  // namespace

void validate_request(const Request& req, const model::StepModelInfo& info, int64_t context_limit, int32_t max_seqs,
                      bool has_tokenizer) {
    if (req.prompt.empty()) fail("the prompt is empty: give at least one token");
    if (req.lora && !info.lora)
        fail("LoRA adapter '{}' named, but the model was opened without LoRA support", req.lora.adapter->name);
    for (size_t i = 0; i < req.prompt.size(); ++i)
        if (req.prompt[i] < 0 || req.prompt[i] >= info.vocab_size)
            fail("prompt token {} at position {} is out of range (vocabulary has {} tokens)", req.prompt[i], i,
                 info.vocab_size);
    if (info.embedding_only && !req.embedding)  // no output head: nothing to generate or score with
        fail("model {} is an embedding model: it serves embeddings only, not {}",
             info.config.name.empty() ? info.config.arch : info.config.name,
             scores_tokens(req) ? "token scores" : "text generation");
    if (!req.token_types.empty()) {
        if (!req.embedding || !info.bidirectional)
            fail("token types are an encoder embedding's input; this request is not one");
        if (req.token_types.size() != req.prompt.size())
            fail("{} token types for a prompt of {} tokens", req.token_types.size(), req.prompt.size());
        for (size_t i = 0; i < req.token_types.size(); ++i)
            if (req.token_types[i] != 0 && (req.token_types[i] < 0 || req.token_types[i] >= info.n_token_types))
                fail("token type {} at position {} is out of range (the model has {} token types)", req.token_types[i],
                     i, std::max(info.n_token_types, 1));
    }
    validate_images(req, info);
    if (scores_tokens(req)) return validate_scoring(req, info.vocab_size, context_limit);  // token_scores.h
    if (req.embedding) {
        if (info.hidden_size < 1) fail("this model gives no hidden states, so it cannot embed");
        if (int64_t(req.prompt.size()) > context_limit)
            fail("the input has {} tokens, more than the {} that fit (model context {}, KV cache {} blocks of {} tokens)",
                 req.prompt.size(), context_limit, info.max_context, info.n_kv_blocks, info.block_size);
        if (req.n != 1) fail("an embedding request has one result; n must be 1, got {}", req.n);
        if (req.grammar) fail("an embedding request generates nothing, so it takes no grammar");
        if (req.logprobs != -1) fail("an embedding request generates nothing, so it has no logprobs");
        if (req.prompt_logprobs != -1) fail("an embedding request takes no prompt logprobs");
        return;
    }
    if (int64_t(req.prompt.size()) + 1 > context_limit)
        fail("the prompt has {} tokens, which leaves no room to generate: at most {} tokens fit (model context {}, "
             "KV cache {} blocks of {} tokens)",
             req.prompt.size(), context_limit - 1, info.max_context, info.n_kv_blocks, info.block_size);
    if (req.stop.max_tokens < 1) fail("max_tokens must be at least 1, got {}", req.stop.max_tokens);
    if (req.stop.min_tokens < 0 || req.stop.min_tokens > req.stop.max_tokens)
        fail("min_tokens must be between 0 and max_tokens ({}), got {}", req.stop.max_tokens, req.stop.min_tokens);
    if (req.n < 1 || req.n > max_seqs)
        fail("n must be in 1..{} (the engine's max_seqs), got {}", max_seqs, req.n);
    if (req.logprobs < -1 || req.logprobs > 20) fail("logprobs must be in 0..20, got {}", req.logprobs);
    if (req.prompt_logprobs < -1 || req.prompt_logprobs > 20)
        fail("prompt_logprobs must be in 0..20, got {}", req.prompt_logprobs);
    if (!(req.weight > 0) || !std::isfinite(req.weight)) fail("a tenant's weight must be positive, got {}", req.weight);
    for (int32_t id : req.stop.stop_token_ids)
        if (id < 0 || id >= info.vocab_size)
            fail("stop token id {} is out of range (vocabulary has {} tokens)", id, info.vocab_size);
    for (const auto& s : req.stop.stop)
        if (s.empty()) fail("stop strings must not be empty");
    if (!req.stop.stop.empty() && !has_tokenizer) fail("stop strings need a tokenizer, and this engine has none");
    if (req.grammar && !has_tokenizer) fail("a grammar needs a tokenizer, and this engine has none");
    if (req.thinking && !has_tokenizer) fail("a thinking budget needs a tokenizer, and this engine has none");
    if (req.thinking && req.thinking->max_tokens < 0) fail("a thinking budget must be at least 0 tokens");
    req.sampling.validate();
}

}  // namespace pagoda::engine
