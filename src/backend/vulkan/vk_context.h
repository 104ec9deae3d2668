// One Vulkan device for the process: the instance (with the Khronos validation layer when
// PAGODA_VULKAN_VALIDATION=1), the physical device pagoda computes on, its logical device and compute
// queue, memory allocation (every buffer addressed by its device address, so shaders need no
// descriptor sets and no tensor is bound by the per-binding size limit), and the compute pipelines,
// built from the embedded SPIR-V with their specialisation constants and cached by name.
//
// Validation errors are recorded by a debug-utils messenger; Stream::flush() turns any recorded
// error into a pagoda::Error, so a test that triggers one fails.
#pragma once
#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/vulkan/vk_api.h"

namespace pagoda::backend::vulkan {

// What `pagoda devices` prints and what the backend sizes its kernels by.
struct DeviceInfo {
    std::string name;
    std::string type;  // "discrete GPU", "integrated GPU", "CPU", ...
    std::string driver;
    uint32_t api_version = 0;
    uint32_t subgroup_size = 0;
    bool subgroup_arithmetic = false;  // GL_KHR_shader_subgroup_arithmetic in compute shaders
    uint32_t max_workgroup_size = 0;
    uint32_t shared_memory = 0;            // bytes per workgroup
    uint64_t max_storage_buffer_range = 0; // bytes one storage binding may cover
    uint32_t max_push_constants = 0;
    std::vector<uint64_t> device_local_heaps, other_heaps;  // bytes
    // VK_EXT_memory_budget: per device-local heap, what the process may use (other processes' use
    // taken off) and what it uses now, as of describe(); empty without the extension.
    bool memory_budget = false;
    std::vector<uint64_t> device_local_budget, device_local_usage;
    bool fp16 = false, int8 = false, int64 = false, buffer_device_address = false;
    bool storage_16bit = false, storage_8bit = false;
    // Why pagoda cannot compute on this device ("" when it can).
    std::string unusable;
};

std::string format_bytes(uint64_t bytes);
// Every Vulkan device the loader reports. Throws pagoda::Error naming what is missing (the loader,
// any device).
std::vector<DeviceInfo> list_devices();

struct Buffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceAddress address = 0;
    void* mapped = nullptr;  // host-visible buffers only
    size_t size = 0;
    uint32_t heap = 0;        // the memory heap it came from
    uint64_t allocated = 0;   // bytes of that heap it holds (the driver's size, >= size)
};

class Context {
public:
    // The process's context, created on first use. Throws pagoda::Error naming what is missing (no
    // loader, no device, a device lacking a feature pagoda needs, the validation layer).
    static std::shared_ptr<Context> get();
    ~Context();

    VkApi& api;
    VkInstance instance = VK_NULL_HANDLE;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    uint32_t queue_family = 0;
    DeviceInfo info;
    bool validation = false;
    std::mutex queue_mutex;  // vkQueueSubmit needs the queue externally synchronised

    // host_visible: mapped, coherent memory the host writes and reads; otherwise device-local memory.
    // Throws naming `what` when the device cannot hold it.
    Buffer create_buffer(size_t bytes, bool host_visible, const std::string& what);
    void destroy(Buffer& b);
    // Buffers destroyed so far: a recorded command buffer naming one is invalid, so a stream drops
    // its replay cache when this moves.
    uint64_t buffers_destroyed() const { return buffers_destroyed_.load(); }

    // Free bytes of the largest device-local heap, what a fractional --kv-memory is a fraction of (as
    // vLLM's gpu_memory_utilization): the heap's budget less its usage where the device has
    // VK_EXT_memory_budget (other processes' use counted; PAGODA_VULKAN_MEMORY_BUDGET=0 ignores it),
    // otherwise the heap's size less what this process has allocated from it.
    uint64_t free_device_memory() const;
    bool uses_memory_budget() const;  // free_device_memory's source is VK_EXT_memory_budget
    uint64_t allocated_bytes(uint32_t heap) const;  // what this process holds of a heap
    uint32_t largest_device_local_heap() const { return largest_heap_; }

    VkPipelineLayout pipeline_layout() const { return layout_; }
    // The pipeline of module `name` with specialisation constants 0.. = `constants`.
    VkPipeline pipeline(const std::string& name, const std::vector<uint32_t>& constants);

    // Errors the validation layer reported since the last call.
    std::vector<std::string> take_validation_errors();
    void record_validation_error(std::string message);

    static constexpr uint32_t kPushConstantBytes = 128;

private:
    Context();
    void release();  // destroys what was created, in reverse order (the destructor and a failed constructor)
    VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPhysicalDeviceMemoryProperties memory_{};
    uint32_t largest_heap_ = 0;
    std::vector<uint64_t> allocated_;  // per heap, under mutex_
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, std::vector<uint32_t>>, VkPipeline> pipelines_;
    std::vector<std::string> errors_;
    std::atomic<uint64_t> buffers_destroyed_{0};
};

// The commands of one submission, recorded op by op on the host (a tape of words: the command
// kind, the pipeline or buffers, the grid, the push constants) and encoded into a Vulkan command
// buffer at flush(). Every command is followed by a full compute/transfer barrier: ops run in
// recorded order.
//
// Replay (PAGODA_VULKAN_REPLAY=1, the default; Vulkan's counterpart of CUDA graphs): a submission
// with at least one dispatch (a step) keeps its encoded command buffer, keyed by its tape; a later
// submission whose tape is identical word for word (same pipelines, grids, push constants, buffers)
// resubmits it without encoding anything. So everything that changes from step to step must live in
// device buffers at stable addresses (the backend's step buffer), never in push constants. Any other
// tape is encoded anew (a re-recording, counted). The cache holds kReplayCacheSize command buffers,
// the least recently used evicted, and is dropped whenever the context destroys a buffer.
// PAGODA_VULKAN_REPLAY=0 encodes every submission into a one-time command buffer.
class Stream {
public:
    explicit Stream(std::shared_ptr<Context> ctx);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    void dispatch(VkPipeline pipeline, const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
    // A dispatch whose grid (three uints) a shader recorded earlier wrote at `offset` of `args`.
    void dispatch_indirect(VkPipeline pipeline, const void* push, uint32_t push_bytes, const Buffer& args, size_t offset);
    void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes);
    void copy_regions(const Buffer& src, const Buffer& dst, const std::vector<VkBufferCopy>& regions);
    void fill_zero(const Buffer& dst);  // the whole buffer (its size a multiple of 4)
    // Submits what was recorded and waits; throws on a device error or a recorded validation error.
    void flush();
    bool pending() const { return !tape_.empty(); }
    uint64_t dispatches() const { return dispatches_; }
    bool replay() const { return replay_; }
    // Submissions (each one a host wait) by every stream of the process, for the tests that a step
    // records without waiting.
    static uint64_t submissions();
    // Dispatches recorded (replayed or not) by every stream of the process: the kernels a step runs.
    static uint64_t all_dispatches();
    // By every stream of the process: submissions encoded into a kept command buffer (recordings)
    // and submissions that resubmitted one (replays).
    static uint64_t recordings();
    static uint64_t replays();
    // Host seconds spent encoding Vulkan commands (vkCmd* calls), by every stream of the process.
    static double encode_seconds();
    // Host seconds from vkQueueSubmit to the fence signalled (the device's time, seen from the host).
    static double device_seconds();

    static constexpr size_t kReplayCacheSize = 16;

private:
    struct Recorded {
        std::vector<uint64_t> tape;
        VkCommandBuffer cmd = VK_NULL_HANDLE;
        uint64_t last_used = 0;
    };
    void push_header(uint64_t kind, VkPipeline pipeline, const void* push, uint32_t push_bytes);
    void encode(VkCommandBuffer cmd, bool one_time);
    void barrier(VkCommandBuffer cmd);
    void submit(VkCommandBuffer cmd);
    VkCommandBuffer replayable();  // the kept command buffer for tape_, encoding it when new
    void drop_cache();
    std::shared_ptr<Context> ctx_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cmd_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    bool replay_ = true;
    std::vector<uint64_t> tape_;
    uint64_t tape_dispatches_ = 0;  // dispatches on tape_
    uint64_t dispatches_ = 0;
    std::vector<Recorded> cache_;
    uint64_t use_clock_ = 0, buffers_destroyed_ = 0;
};

}  // namespace pagoda::backend::vulkan
