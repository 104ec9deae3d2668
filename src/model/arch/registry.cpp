#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/arch.h"

namespace pagoda::model {
namespace {

struct Entry {
    const char* arch;
    ArchBuilder build;
};
// One line per architecture.
constexpr Entry kBuilders[] = {
    {"llama", build_llama},
    {"qwen2", build_qwen2},
    {"qwen3", build_qwen3},
    {"qwen3vl", build_qwen3vl},
    {"qwen2moe", build_qwen2moe},
    {"qwen3moe", build_qwen3moe},
    {"gemma2", build_gemma2},
    {"gemma3", build_gemma3},
    {"gemma4", build_gemma4},
    {"phi3", build_phi3},
    {"gpt-oss", build_gpt_oss},
    {"deepseek2", build_deepseek2},
    {"glm4moe", build_glm4moe},
    {"glm4", build_glm4},
    {"smollm3", build_smollm3},
    {"mistral3", build_mistral3},
    {"qwen35", build_qwen35},
    {"qwen35moe", build_qwen35moe},
    {"bert", build_bert},
    {"nomic-bert", build_nomic_bert},
    {"jina-bert-v2", build_jina_bert_v2},
};

}  // namespace

std::vector<std::string> supported_architectures() {
    std::vector<std::string> out;
    for (const auto& e : kBuilders) out.push_back(e.arch);
    return out;
}

ArchBuilder find_arch_builder(const std::string& arch) {
    for (const auto& e : kBuilders)
        if (arch == e.arch) return e.build;
    fail("architecture '{}' is not supported (supported: {})", arch, fmt::join(supported_architectures(), ", "));
}

}  // namespace pagoda::model
