// The Vulkan backend's encoders for the optional ops that have no home in vulkan_backend.cpp:
// copy_columns (backend::ColumnCopy, MLA's key assembly). Each records its dispatches on the
// device's stream; the caller has checked the shapes (check_column_copy) and passes arena addresses.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"

namespace pagoda::backend::vulkan {

// dst (rows x dst_cols at device address dst) gets ColumnCopy `c` of src (rows x src_cols).
void encode_copy_columns(DeviceState& dev, uint64_t src, int64_t src_cols, uint64_t dst, int64_t dst_cols, int64_t rows,
                         const ColumnCopy& c);

}  // namespace pagoda::backend::vulkan
