// LoRA adapter flags of run, batch and serve: `--lora NAME=PATH[:SCALE]` (repeatable; PATH a GGUF
// LoRA file or a PEFT folder), and llama.cpp's spellings `--lora FILE` (named after the file) and
// `--lora-scaled FILE SCALE`. Any of them opens the model with LoRA support (StepModelOptions::lora);
// the adapters load once the model is open (StepModel::load_lora), each failure naming its file.
#pragma once
#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "lora/adapter.h"
#include "lora/lora_spec.h"
#include "model/step_model.h"

namespace pagoda::app {

using lora::LoraSpec;
using lora::parse_lora_scale;

// "NAME=PATH[:SCALE]" (lora/lora_spec.h) or "FILE" (llama.cpp's form: the name is the file's stem,
// the scale 1).
inline LoraSpec parse_lora_flag(const std::string& value) {
    const std::string what = "--lora " + value;
    if (value.find('=') != std::string::npos) return lora::parse_lora_spec(value, what);
    if (value.empty()) fail("{}: no adapter path", what);
    return {std::filesystem::path(value).filename().replace_extension().string(), value, 1};
}

struct LoraFlags {
    std::vector<std::string> lora, lora_scaled;
    std::string dtype;  // --lora-dtype (empty: exact)

    void add_to(CLI::App& sub) {
        sub.add_option("--lora", lora,
                       "A LoRA adapter, NAME=PATH[:SCALE] (PATH a GGUF LoRA file or a PEFT folder; repeatable), or "
                       "llama.cpp's --lora FILE (named after the file, scale 1); serve with several models: "
                       "MODEL:NAME=PATH[:SCALE], the adapter of that base model")
            ->expected(1)
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        sub.add_option("--lora-scaled", lora_scaled, "llama.cpp's --lora-scaled FILE SCALE (repeatable)")
            ->expected(2)
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        sub.add_option("--lora-dtype", dtype,
                       "How adapters are stored for the steps: exact (default: f16/bf16 where every number is one, "
                       "else f32), bf16 or f16 (an adapter not exactly 16-bit rounded to it: half the bytes of f32 "
                       "read each step)");
    }
    // The --lora-dtype choice; refused without an adapter to store (`adapters`: the command has some).
    lora::LoraStorage storage(bool adapters) const {
        if (dtype.empty()) return lora::LoraStorage::exact;
        if (!adapters) fail("--lora-dtype stores LoRA adapters: give --lora (or serve's --allow-runtime-lora) with it");
        return lora::parse_lora_storage(dtype, "--lora-dtype");
    }
    bool any() const { return !lora.empty() || !lora_scaled.empty(); }

    // Every adapter named, checked for unique names. Throws naming the flag.
    std::vector<LoraSpec> specs() const {
        std::vector<LoraSpec> out;
        for (const auto& v : lora) out.push_back(parse_lora_flag(v));
        for (size_t i = 0; i + 1 < lora_scaled.size(); i += 2) {
            LoraSpec s{std::filesystem::path(lora_scaled[i]).filename().replace_extension().string(), lora_scaled[i],
                       parse_lora_scale(lora_scaled[i + 1], "--lora-scaled " + lora_scaled[i])};
            out.push_back(std::move(s));
        }
        std::set<std::string> names;
        for (const auto& s : out)
            if (!names.insert(s.name).second) fail("two LoRA adapters are named '{}'; name them with --lora NAME=PATH", s.name);
        return out;
    }

    std::vector<std::shared_ptr<const lora::Adapter>> load(model::StepModel& model) const {
        std::vector<std::shared_ptr<const lora::Adapter>> out;
        for (const auto& s : specs()) out.push_back(model.load_lora(s.path, s.name, s.scale));
        return out;
    }
};

}  // namespace pagoda::app
