// Stream (vk_context.h): one command buffer, recorded op by op, submitted and waited for at flush().
#include <atomic>
#include <fmt/format.h>

#include "backend/vulkan/vk_context.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {
std::atomic<uint64_t> g_submissions{0};
}  // namespace

uint64_t Stream::submissions() { return g_submissions.load(); }

Stream::Stream(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
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
}

Stream::~Stream() {
    auto& api = ctx_->api;
    if (recording_) {
        try {
            flush();
        } catch (...) {
        }
    }
    api.vkDestroyFence(ctx_->device, fence_, nullptr);
    api.vkDestroyCommandPool(ctx_->device, pool_, nullptr);
}

void Stream::begin() {
    if (recording_) return;
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(ctx_->api.vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    recording_ = true;
}

void Stream::barrier() {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT;
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    ctx_->api.vkCmdPipelineBarrier(cmd_, stages, stages | VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0, 1,
                                   &mb, 0, nullptr, 0, nullptr);
}

void Stream::dispatch(VkPipeline pipeline, const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (gx == 0 || gy == 0 || gz == 0) return;
    begin();
    auto& api = ctx_->api;
    api.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    api.vkCmdPushConstants(cmd_, ctx_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    api.vkCmdDispatch(cmd_, gx, gy, gz);
    barrier();
    ++dispatches_;
}

void Stream::dispatch_indirect(VkPipeline pipeline, const void* push, uint32_t push_bytes, const Buffer& args, size_t offset) {
    begin();
    auto& api = ctx_->api;
    api.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    api.vkCmdPushConstants(cmd_, ctx_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    api.vkCmdDispatchIndirect(cmd_, args.buffer, offset);
    barrier();
    ++dispatches_;
}

void Stream::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) {
    if (bytes == 0) return;
    begin();
    VkBufferCopy region{src_offset, dst_offset, bytes};
    ctx_->api.vkCmdCopyBuffer(cmd_, src.buffer, dst.buffer, 1, &region);
    barrier();
}

void Stream::copy_regions(const Buffer& src, const Buffer& dst, const std::vector<VkBufferCopy>& regions) {
    if (regions.empty()) return;
    begin();
    ctx_->api.vkCmdCopyBuffer(cmd_, src.buffer, dst.buffer, uint32_t(regions.size()), regions.data());
    barrier();
}

void Stream::fill_zero(const Buffer& dst) {
    begin();
    ctx_->api.vkCmdFillBuffer(cmd_, dst.buffer, 0, VK_WHOLE_SIZE, 0);
    barrier();
}

void Stream::flush() {
    if (!recording_) return;
    auto& api = ctx_->api;
    recording_ = false;
    check(api.vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    {
        std::lock_guard lock(ctx_->queue_mutex);
        check(api.vkQueueSubmit(ctx_->queue, 1, &si, fence_), "vkQueueSubmit");
    }
    ++g_submissions;
    check(api.vkWaitForFences(ctx_->device, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(api.vkResetFences(ctx_->device, 1, &fence_), "vkResetFences");
    check(api.vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    if (ctx_->validation) {
        const std::vector<std::string> errors = ctx_->take_validation_errors();
        if (!errors.empty()) fail("vulkan backend: the validation layer reported {} error(s); the first: {}", errors.size(), errors[0]);
    }
}

}  // namespace pagoda::backend::vulkan
