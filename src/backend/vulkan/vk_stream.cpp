// Stream (vk_context.h): commands kept on a host tape op by op, encoded (or a kept command buffer
// replayed) and submitted at flush(), which waits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <type_traits>

#include "backend/vulkan/vk_context.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {
std::atomic<uint64_t> g_submissions{0}, g_recordings{0}, g_replays{0}, g_encode_ns{0}, g_device_ns{0}, g_dispatches{0};

uint64_t since(std::chrono::steady_clock::time_point start) {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

enum Kind : uint64_t { kDispatch = 1, kDispatchIndirect = 2, kCopy = 3, kFill = 4 };

template <class Handle>
uint64_t word(Handle h) {
    if constexpr (std::is_pointer_v<Handle>) return uint64_t(reinterpret_cast<uintptr_t>(h));
    else return uint64_t(h);
}
template <class Handle>
Handle handle(uint64_t w) {
    if constexpr (std::is_pointer_v<Handle>) return reinterpret_cast<Handle>(uintptr_t(w));
    else return Handle(w);
}

bool replay_from_env() {
    const char* env = std::getenv("PAGODA_VULKAN_REPLAY");
    if (!env || !*env) return true;
    const std::string v(env);
    if (v == "1") return true;
    if (v == "0") return false;
    fail("PAGODA_VULKAN_REPLAY is '{}': it takes 0 (encode every step) or 1 (replay recorded steps)", v);
}
}  // namespace

uint64_t Stream::submissions() { return g_submissions.load(); }
uint64_t Stream::all_dispatches() { return g_dispatches.load(); }
uint64_t Stream::recordings() { return g_recordings.load(); }
uint64_t Stream::replays() { return g_replays.load(); }
double Stream::encode_seconds() { return double(g_encode_ns.load()) * 1e-9; }
double Stream::device_seconds() { return double(g_device_ns.load()) * 1e-9; }

Stream::Stream(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)), replay_(replay_from_env()) {
    auto& api = ctx_->api;
    VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = ctx_->queue_family;
    check(api.vkCreateCommandPool(ctx_->device, &pi, nullptr, &pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(api.vkAllocateCommandBuffers(ctx_->device, &ai, &cmd_), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(api.vkCreateFence(ctx_->device, &fi, nullptr, &fence_), "vkCreateFence");
    buffers_destroyed_ = ctx_->buffers_destroyed();
}

Stream::~Stream() {
    auto& api = ctx_->api;
    if (pending()) {
        try {
            flush();
        } catch (...) {
        }
    }
    api.vkDestroyFence(ctx_->device, fence_, nullptr);
    api.vkDestroyCommandPool(ctx_->device, pool_, nullptr);  // frees the kept command buffers too
}

void Stream::push_header(uint64_t kind, VkPipeline pipeline, const void* push, uint32_t push_bytes) {
    const size_t words = (size_t(push_bytes) + 7) / 8;
    tape_.push_back(kind);
    tape_.push_back(word(pipeline));
    tape_.push_back(push_bytes);
    const size_t at = tape_.size();
    tape_.resize(at + words, 0);
    std::memcpy(tape_.data() + at, push, push_bytes);
}

void Stream::dispatch(VkPipeline pipeline, const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (gx == 0 || gy == 0 || gz == 0) return;
    push_header(kDispatch, pipeline, push, push_bytes);
    tape_.push_back(uint64_t(gx) | uint64_t(gy) << 32);
    tape_.push_back(gz);
    ++tape_dispatches_;
    ++dispatches_;
    ++g_dispatches;
}

void Stream::dispatch_indirect(VkPipeline pipeline, const void* push, uint32_t push_bytes, const Buffer& args, size_t offset) {
    push_header(kDispatchIndirect, pipeline, push, push_bytes);
    tape_.push_back(word(args.buffer));
    tape_.push_back(offset);
    ++tape_dispatches_;
    ++dispatches_;
    ++g_dispatches;
}

void Stream::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) {
    if (bytes == 0) return;
    copy_regions(src, dst, {VkBufferCopy{src_offset, dst_offset, bytes}});
}

void Stream::copy_regions(const Buffer& src, const Buffer& dst, const std::vector<VkBufferCopy>& regions) {
    if (regions.empty()) return;
    tape_.insert(tape_.end(), {kCopy, word(src.buffer), word(dst.buffer), regions.size()});
    for (const VkBufferCopy& r : regions) tape_.insert(tape_.end(), {r.srcOffset, r.dstOffset, r.size});
}

void Stream::fill_zero(const Buffer& dst) { tape_.insert(tape_.end(), {kFill, word(dst.buffer)}); }

void Stream::barrier(VkCommandBuffer cmd) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT;
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    ctx_->api.vkCmdPipelineBarrier(cmd, stages, stages | VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0, 1,
                                   &mb, 0, nullptr, 0, nullptr);
}

// Walks tape_ (the layout dispatch()/copy_regions()/fill_zero() wrote) into `cmd`.
void Stream::encode(VkCommandBuffer cmd, bool one_time) {
    const auto start = std::chrono::steady_clock::now();
    auto& api = ctx_->api;
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
    check(api.vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
    std::vector<VkBufferCopy> regions;
    for (size_t i = 0; i < tape_.size();) {
        const uint64_t kind = tape_[i];
        if (kind == kDispatch || kind == kDispatchIndirect) {
            const auto pipeline = handle<VkPipeline>(tape_[i + 1]);
            const auto push_bytes = uint32_t(tape_[i + 2]);
            const uint64_t* push = tape_.data() + i + 3;
            i += 3 + (size_t(push_bytes) + 7) / 8;
            api.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
            api.vkCmdPushConstants(cmd, ctx_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
            if (kind == kDispatch) api.vkCmdDispatch(cmd, uint32_t(tape_[i]), uint32_t(tape_[i] >> 32), uint32_t(tape_[i + 1]));
            else api.vkCmdDispatchIndirect(cmd, handle<VkBuffer>(tape_[i]), tape_[i + 1]);
            i += 2;
        } else if (kind == kCopy) {
            const size_t n = size_t(tape_[i + 3]);
            regions.resize(n);
            for (size_t r = 0; r < n; ++r) regions[r] = {tape_[i + 4 + 3 * r], tape_[i + 5 + 3 * r], tape_[i + 6 + 3 * r]};
            api.vkCmdCopyBuffer(cmd, handle<VkBuffer>(tape_[i + 1]), handle<VkBuffer>(tape_[i + 2]), uint32_t(n), regions.data());
            i += 4 + 3 * n;
        } else if (kind == kFill) {
            api.vkCmdFillBuffer(cmd, handle<VkBuffer>(tape_[i + 1]), 0, VK_WHOLE_SIZE, 0);
            i += 2;
        } else {
            fail("vulkan stream: a corrupt command tape (kind {} at word {})", kind, i);
        }
        barrier(cmd);
    }
    check(api.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    g_encode_ns += since(start);
}

void Stream::drop_cache() {
    for (Recorded& r : cache_) ctx_->api.vkFreeCommandBuffers(ctx_->device, pool_, 1, &r.cmd);
    cache_.clear();
}

VkCommandBuffer Stream::replayable() {
    if (ctx_->buffers_destroyed() != buffers_destroyed_) {
        drop_cache();
        buffers_destroyed_ = ctx_->buffers_destroyed();
    }
    ++use_clock_;
    for (Recorded& r : cache_)
        if (r.tape == tape_) {
            r.last_used = use_clock_;
            ++g_replays;
            return r.cmd;
        }
    if (cache_.size() >= kReplayCacheSize) {
        auto oldest = std::min_element(cache_.begin(), cache_.end(), [](const Recorded& a, const Recorded& b) { return a.last_used < b.last_used; });
        ctx_->api.vkFreeCommandBuffers(ctx_->device, pool_, 1, &oldest->cmd);
        cache_.erase(oldest);
    }
    Recorded r;
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(ctx_->api.vkAllocateCommandBuffers(ctx_->device, &ai, &r.cmd), "vkAllocateCommandBuffers");
    try {
        encode(r.cmd, false);
    } catch (...) {
        ctx_->api.vkFreeCommandBuffers(ctx_->device, pool_, 1, &r.cmd);
        throw;
    }
    r.tape = tape_;
    r.last_used = use_clock_;
    cache_.push_back(std::move(r));
    ++g_recordings;
    return cache_.back().cmd;
}

void Stream::submit(VkCommandBuffer cmd) {
    const auto start = std::chrono::steady_clock::now();
    auto& api = ctx_->api;
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    {
        std::lock_guard lock(ctx_->queue_mutex);
        check(api.vkQueueSubmit(ctx_->queue, 1, &si, fence_), "vkQueueSubmit");
    }
    ++g_submissions;
    check(api.vkWaitForFences(ctx_->device, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(api.vkResetFences(ctx_->device, 1, &fence_), "vkResetFences");
    g_device_ns += since(start);
}

void Stream::flush() {
    if (tape_.empty()) return;
    // A submission without dispatches (an upload, a download, a block copy) is encoded each time:
    // keeping it would only evict steps from the cache.
    const bool keep = replay_ && tape_dispatches_ > 0;
    VkCommandBuffer cmd = cmd_;
    try {
        if (keep) cmd = replayable();
        else encode(cmd_, true);
    } catch (...) {
        tape_.clear();
        tape_dispatches_ = 0;
        if (!keep) ctx_->api.vkResetCommandBuffer(cmd_, 0);
        throw;
    }
    tape_.clear();
    tape_dispatches_ = 0;
    submit(cmd);
    if (!keep) check(ctx_->api.vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    if (ctx_->validation) {
        const std::vector<std::string> errors = ctx_->take_validation_errors();
        if (!errors.empty()) fail("vulkan backend: the validation layer reported {} error(s); the first: {}", errors.size(), errors[0]);
    }
}

}  // namespace pagoda::backend::vulkan
