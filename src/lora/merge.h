// Merging an adapter into its base (`pagoda lora-merge`): every targeted weight becomes
// W + s · factor · B A, written in W's own type (F32/F16/BF16 rounded, block types dequantised,
// updated and requantised with the same quantiser); every other tensor and all metadata are copied
// as they are. For single-adapter deployments, and the tests' independent check of the LoRA path.
#pragma once
#include <string>

#include "gguf/gguf.h"
#include "lora/adapter.h"

namespace pagoda::lora {

// The merged model as a Writer ready to write(); it borrows `base`'s tensor bytes for untouched
// tensors, so `base` must outlive it. Throws naming the tensor when its type cannot be requantised.
gguf::Writer merge_adapter(const gguf::File& base, const Adapter& adapter, float scale);

}  // namespace pagoda::lora
