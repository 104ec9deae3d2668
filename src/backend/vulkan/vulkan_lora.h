// Backend::lora_add on the Vulkan device (shaders/lora_add.comp): per segment, its A, B and rows are
// written into a host-visible buffer at the buffer's next free bytes (no host wait: the step's
// recorded work reads only bytes written before it; the buffer starts over after a flush, at
// begin_step or when full), then one dispatch of a workgroup per row. Rows of no segment are not
// touched; a row's result depends on that row and its adapter only (batch invariance).
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"

namespace pagoda::backend::vulkan {

class VulkanLora {
public:
    explicit VulkanLora(std::shared_ptr<DeviceState> dev) : dev_(std::move(dev)) {}
    ~VulkanLora();
    VulkanLora(const VulkanLora&) = delete;
    VulkanLora& operator=(const VulkanLora&) = delete;

    // The backend's begin_step, after its flush: no recorded work reads the buffer.
    void begin_step() { used_ = 0; }
    // x: T x in, y: T rows of `out` values y_stride floats apart (0: out; a fused op's part of its
    // wider scratch rows), at device addresses the caller checked. Throws naming the problem for a
    // row outside 0..T, a rank of 0 or above kMaxRank, a null matrix.
    void add(uint64_t x, uint64_t y, int64_t rows, int64_t in, int64_t out, std::span<const LoraSegment> segments,
             int64_t y_stride = 0);

    static constexpr int64_t kMaxRank = 1024;  // lora_add.comp's shared h

private:
    static size_t padded(size_t bytes);
    // Room for `bytes` at used_: flushes and starts over (growing the buffer) when it lacks it.
    void reserve(size_t bytes);
    uint64_t put(const void* data, size_t bytes);  // the device address of a copy of `data` (reserved)
    std::shared_ptr<DeviceState> dev_;
    Buffer buf_;
    size_t used_ = 0;
};

}  // namespace pagoda::backend::vulkan
