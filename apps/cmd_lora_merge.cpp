// `pagoda lora-merge --model BASE --lora FILE[:SCALE] -o OUT.gguf`: the base with one LoRA adapter
// (a GGUF LoRA file or a PEFT folder) merged into its weights, W + scale · B·A, for single-adapter
// deployments. Every other tensor and all metadata are copied; merged weights keep their type
// (quantised ones are dequantised, updated and requantised with the same quantiser).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/lora_flags.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "lora/adapter.h"
#include "lora/merge.h"

namespace pagoda::app {
namespace {

struct MergeOptions {
    std::string model, lora, output;
};

// "PATH[:SCALE]" (lora/lora_spec.h), named "merged".
LoraSpec parse_merge_lora(const std::string& value) {
    LoraSpec s = lora::parse_lora_path(value, "--lora " + value);
    s.name = "merged";
    return s;
}

int lora_merge(const MergeOptions& o) {
    if (std::filesystem::path(o.output).extension() != ".gguf") fail("-o {}: the output must be a .gguf file", o.output);
    const LoraSpec spec = parse_merge_lora(o.lora);
    auto base = gguf::File::open(o.model);
    const lora::Adapter adapter = lora::load_adapter(spec.path, *base, spec.name, spec.scale);
    lora::merge_adapter(*base, adapter, spec.scale).write(o.output);
    std::fprintf(stderr, "pagoda lora-merge: %zu weights of %s updated by %s at scale %g -> %s\n", adapter.pairs.size(),
                 o.model.c_str(), spec.path.c_str(), double(spec.scale), o.output.c_str());
    return 0;
}

CommandRegistration reg("lora-merge", "Merge a LoRA adapter into its base model's weights (a new GGUF)", [](CLI::App& sub) {
    auto o = std::make_shared<MergeOptions>();
    sub.add_option("-m,--model", o->model, "The base model (a GGUF file)")->required();
    sub.add_option("--lora", o->lora, "The adapter: a GGUF LoRA file or a PEFT folder, PATH[:SCALE] (scale 1)")->required();
    sub.add_option("-o,--output", o->output, "The merged model (.gguf)")->required();
    return [o] { return lora_merge(*o); };
});

}  // namespace
}  // namespace pagoda::app
