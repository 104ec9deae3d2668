// The step's rope tables on the device: per rope, the cosines then the sines of every (token, pair)
// of the step, computed in double on the host (a float angle at position 5000 would be off by
// ~3e-4), once per rope per step, in one host-visible buffer that lives across steps (so a replayed
// step finds its tables where it was recorded). A multi-axis rope (M-RoPE: RopeSpec::pair_axis) is
// only another table: pair i of token t takes the position of its axis (backend::rope_position's
// rule), so rope.comp and qkv_epilogue.comp run it unchanged, at plain RoPE's cost.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"

namespace pagoda::backend::vulkan {

class RopeTables {
public:
    explicit RopeTables(std::shared_ptr<DeviceState> dev) : dev_(std::move(dev)) {}
    ~RopeTables() { dev_->ctx->destroy(buf_); }
    RopeTables(const RopeTables&) = delete;
    RopeTables& operator=(const RopeTables&) = delete;

    // Creates the buffer before the first step, so that step is not cut in two by its growth.
    void reserve();
    // Forgets the previous step's tables.
    void begin_step() {
        tables_.clear();
        used_ = 0;
    }
    // The device address of rope `r`'s table for the step's positions (built on first use).
    // axis_positions: kRopeAxes per position (StepInputs::rope_positions), or empty: every axis is
    // the position; read only by a rope with pair axes.
    uint64_t table(const Rope& r, std::span<const int32_t> positions, std::span<const int32_t> axis_positions);

private:
    std::shared_ptr<DeviceState> dev_;
    Buffer buf_;
    std::map<const Rope*, uint64_t> tables_;
    size_t used_ = 0;  // floats
};

}  // namespace pagoda::backend::vulkan
