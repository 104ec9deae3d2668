#include "backend/vulkan/rope_tables.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pagoda::backend::vulkan {

void RopeTables::reserve() {
    if (!buf_.buffer) buf_ = dev_->ctx->create_buffer(1 << 16, true, "the rope tables");
}

uint64_t RopeTables::table(const Rope& r, std::span<const int32_t> positions, std::span<const int32_t> axis_positions) {
    if (auto it = tables_.find(&r); it != tables_.end()) return it->second;
    const RopeSpec& spec = r.spec();
    const size_t half = size_t(spec.dims / 2), n = positions.size(), floats = 2 * n * half;
    const bool axes = !spec.pair_axis.empty() && !axis_positions.empty();
    if (axes && axis_positions.size() != n * size_t(kRopeAxes))
        fail("vulkan rope: {} rotary positions for {} tokens ({} each)", axis_positions.size(), n, kRopeAxes);
    if ((used_ + floats) * 4 > buf_.size) {
        dev_->stream.flush();  // recorded ropes read the old buffer
        dev_->ctx->destroy(buf_);
        buf_ = dev_->ctx->create_buffer(std::max<size_t>((used_ + floats) * 4 * 2, 1 << 16), true, "the rope tables");
        tables_.clear();
        used_ = 0;
    }
    float* at = static_cast<float*>(buf_.mapped) + used_;
    for (size_t t = 0; t < n; ++t)
        for (size_t i = 0; i < half; ++i) {
            const int32_t position = axes ? axis_positions[t * size_t(kRopeAxes) + spec.pair_axis[i]] : positions[t];
            const double angle = double(position) * spec.inv_freq[i];
            at[t * half + i] = float(std::cos(angle));
            at[n * half + t * half + i] = float(std::sin(angle));
        }
    const uint64_t address = buf_.address + used_ * 4;
    used_ += floats;
    tables_[&r] = address;
    return address;
}

}  // namespace pagoda::backend::vulkan
