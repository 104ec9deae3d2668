// The reference backend: the oracle every other backend is tested against. Plain loops in double
// precision, one screen per op, no threads and no SIMD, so each op reads like its comment in
// backend.h. Activations are doubles (activation_size() == 8); read()/write() convert to and from
// float. Weights stay views of the model file and are dequantised row by row when used; the KV
// cache holds doubles rounded to the layout's dtype on write, so it models the stored values
// exactly. Every op checks its tensors' shapes and ranges and throws pagoda::Error naming what is
// wrong. It declares no fused ops.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace pagoda::backend {

std::unique_ptr<Backend> make_reference_backend(const BackendOptions& options);

}  // namespace pagoda::backend
