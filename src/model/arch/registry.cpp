#include <fmt/format.h>

#include "arch/arch_description.h"
#include "core/error.h"
#include "model/arch/arch.h"

namespace pagoda::model {
namespace {

struct Entry {
    const char* arch;
    ArchBuilder build;
};
// One line per architecture of arch/arch_description.h's table, keyed by its name (the model tests
// check that every description has a builder here and every builder a description).
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
    {"qwen3next", build_qwen3next},
    {"minimax-m2", build_minimax_m2},
    {"bert", build_bert},
    {"nomic-bert", build_nomic_bert},
    {"jina-bert-v2", build_jina_bert_v2},
};

ArchBuilder builder_of(std::string_view arch) {
    for (const auto& e : kBuilders)
        if (arch == e.arch) return e.build;
    return nullptr;
}

}  // namespace

std::vector<std::string> supported_architectures() {
    std::vector<std::string> out;  // the described architectures that have a builder, in the table's order
    for (const arch::ArchDescription& d : arch::architectures())
        if (builder_of(d.name)) out.emplace_back(d.name);
    return out;
}

std::vector<std::string> builder_names() {
    std::vector<std::string> out;
    for (const auto& e : kBuilders) out.push_back(e.arch);
    return out;
}

ArchBuilder find_arch_builder(const std::string& arch) {
    if (arch::find_architecture(arch))
        if (ArchBuilder b = builder_of(arch)) return b;
    fail("architecture '{}' is not supported (supported: {})", arch, fmt::join(supported_architectures(), ", "));
}

}  // namespace pagoda::model
