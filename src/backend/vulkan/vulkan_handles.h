// The Vulkan backend's uploaded objects: a weight (laid out by weight_repack.h in one device buffer,
// plus one of group scales for the grouped layout or the grid of a grid type), a vector (a device buffer of f32) and a rope
// (host-side: its cos/sin table is built per step from the step's positions). Each frees its buffers
// after the stream has finished with them.
#pragma once
#include <fmt/format.h>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "backend/vulkan/device_state.h"
#include "backend/vulkan/vulkan_kv_cache.h"
#include "backend/vulkan/weight_repack.h"

namespace pagoda::backend::vulkan {

class VulkanWeight final : public Weight {
public:
    VulkanWeight(std::vector<MatrixSource> parts, std::shared_ptr<DeviceState> dev)
        : Weight(std::move(parts)), dev_(std::move(dev)) {
        const Repacked r = repack(this->parts());
        format = r.format;
        const std::string what = fmt::format("weight '{}'", this->parts()[0].name);
        data = dev_->ctx->create_buffer(r.data.size(), false, what);
        dev_->upload(r.data.data(), data, 0, r.data.size());
        if (!r.groups.empty()) {
            groups = dev_->ctx->create_buffer(r.groups.size() * 4, false, what + " scales");
            dev_->upload(r.groups.data(), groups, 0, r.groups.size() * 4);
        } else if (!r.grid.empty()) {  // a grid type's grid, where the shaders read the groups
            groups = dev_->ctx->create_buffer(r.grid.size(), false, what + " grid");
            dev_->upload(r.grid.data(), groups, 0, r.grid.size());
        }
    }
    ~VulkanWeight() override {
        try {
            dev_->stream.flush();
        } catch (...) {
        }
        dev_->ctx->destroy(data);
        dev_->ctx->destroy(groups);
    }
    WeightFormat format = WeightFormat::f32;
    Buffer data, groups;

private:
    std::shared_ptr<DeviceState> dev_;
};

class VulkanVector final : public Vector {
public:
    VulkanVector(std::span<const float> values, std::shared_ptr<DeviceState> dev) : Vector(int64_t(values.size())), dev_(std::move(dev)) {
        buffer = dev_->ctx->create_buffer(values.size() * 4, false, "a vector");
        dev_->upload(values.data(), buffer, 0, values.size() * 4);
    }
    ~VulkanVector() override {
        try {
            dev_->stream.flush();
        } catch (...) {
        }
        dev_->ctx->destroy(buffer);
    }
    Buffer buffer;

private:
    std::shared_ptr<DeviceState> dev_;
};

class VulkanRope final : public Rope {
public:
    explicit VulkanRope(RopeSpec spec) : Rope(std::move(spec)) {}
};

// The backend's own object behind a handle; throws when another backend made it.
inline const VulkanWeight& weight(const Weight& w) {
    const auto* v = dynamic_cast<const VulkanWeight*>(&w);
    if (!v) fail("vulkan backend: weight '{}' was uploaded to another backend", w.parts().empty() ? "" : w.parts()[0].name);
    return *v;
}
inline const VulkanVector& vec(const Vector& v) {
    const auto* p = dynamic_cast<const VulkanVector*>(&v);
    if (!p) fail("vulkan backend: a vector uploaded to another backend");
    return *p;
}
inline const VulkanKvCache& kv(const KvCache& c) {
    const auto* p = dynamic_cast<const VulkanKvCache*>(&c);
    if (!p) fail("vulkan backend: a KV cache created by another backend");
    return *p;
}

}  // namespace pagoda::backend::vulkan
