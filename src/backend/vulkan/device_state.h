// What a Vulkan backend and the KV caches it creates share: the process's device, the command
// stream their work is recorded into (so a cache's block copies are ordered with the ops), and a
// host-visible staging buffer for reads and writes.
#pragma once
#include <algorithm>
#include <cstring>
#include <memory>

#include "backend/vulkan/vk_context.h"

namespace pagoda::backend::vulkan {

struct DeviceState {
    std::shared_ptr<Context> ctx = Context::get();
    Stream stream{ctx};
    Buffer staging;

    ~DeviceState() {
        try {
            stream.flush();
        } catch (...) {
        }
        ctx->destroy(staging);
    }
    // A staging buffer of at least `bytes` (grown between steps; reserve_activations sizes it for
    // the arena so a step never grows it). Flushes first: pending copies may use the old one.
    Buffer& staging_for(size_t bytes) {
        if (staging.size < bytes) {
            stream.flush();
            ctx->destroy(staging);
            staging = ctx->create_buffer(std::max<size_t>(bytes, 1 << 16), true, "the staging buffer");
        }
        return staging;
    }
    // Device bytes -> host, through staging (submits what was recorded). copy_bytes (>= bytes, 0:
    // bytes) are copied to staging: a padded step's read copies its bucket's rows, so the step's
    // commands, the copy included, replay for every size of the bucket (vulkan_step_inputs.h).
    void download(const Buffer& src, size_t offset, void* out, size_t bytes, size_t copy_bytes = 0) {
        copy_bytes = std::max(copy_bytes, bytes);
        Buffer& s = staging_for(copy_bytes);
        stream.copy(src, offset, s, 0, copy_bytes);
        stream.flush();
        std::memcpy(out, s.mapped, bytes);
    }
    // Host bytes -> device, through staging (submitted at once: staging is reused).
    void upload(const void* in, const Buffer& dst, size_t offset, size_t bytes) {
        Buffer& s = staging_for(bytes);
        stream.flush();
        std::memcpy(s.mapped, in, bytes);
        stream.copy(s, 0, dst, offset, bytes);
        stream.flush();
    }
};

}  // namespace pagoda::backend::vulkan
