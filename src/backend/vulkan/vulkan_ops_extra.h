// The Vulkan backend's encoders for the optional ops that have no home in vulkan_backend.cpp:
// copy_columns (backend::ColumnCopy, MLA's key assembly) and the embedding gathers. Each records its dispatches on the
// device's stream; the caller has checked the shapes (check_column_copy) and passes arena addresses.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"
#include "backend/vulkan/vulkan_handles.h"

namespace pagoda::backend::vulkan {

// dst (rows x dst_cols at device address dst) gets ColumnCopy `c` of src (rows x src_cols).
void encode_copy_columns(DeviceState& dev, uint64_t src, int64_t src_cols, uint64_t dst, int64_t dst_cols, int64_t rows,
                         const ColumnCopy& c);

// out (rows x cols) = (add ? out + : ) row index[t] of the table, dequantised; `index`: the device
// address of rows int32s (the step's tokens, positions or token types).
void encode_embed(DeviceState& dev, const VulkanWeight& table, uint64_t index, uint64_t out, int64_t rows, int64_t cols, bool add);
// Throws "vulkan <what> <i> is outside the <n> rows of <table>" for an index past the table.
void check_embedding_rows(const Weight& table, std::span<const int32_t> indices, const char* what);

}  // namespace pagoda::backend::vulkan
