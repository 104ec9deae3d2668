// A stable 64-bit identity of a model file's weights, for the prefix tier's keys (StepModelInfo::
// model_key): the same file gives the same value in every process and build, a different model —
// other metadata, tensors, types, shapes or weights — a different one. It digests the metadata,
// every tensor's name, type, shape and offset, and a sample of each tensor's bytes (eight 64-byte
// windows spread over it), so opening a multi-gigabyte file costs a few page reads, not a pass.
#pragma once
#include <cstdint>

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

uint64_t model_identity(const gguf::File& file);

}  // namespace pagoda::model
