// Which LoRA adapter a request runs under, for every endpoint that runs the model (completions, chat,
// responses, messages, embeddings, rerank/score; gateway_lora.cpp): `model` naming an adapter (empty
// or the base's id: none) and llama-server's `lora` list (only the endpoints that take the field pass
// it). Throws ApiError: 404 model_not_found for an unknown model, LoraRegistry::resolve's 400s, and a
// 400 for `lora` on a server without adapters. served_model_id: the id a response reports (the one
// the request named, else the base's).
#pragma once
#include <string>
#include <vector>

#include "lora/adapter.h"
#include "server/lora_registry.h"
#include "server/openai_request.h"

namespace pagoda::server {

lora::AdapterRef adapter_for(LoraRegistry* loras, const std::string& base_id, const std::string& model,
                             const std::vector<LoraChoice>& lora);
std::string served_model_id(const std::string& base_id, const std::string& model);

}  // namespace pagoda::server
