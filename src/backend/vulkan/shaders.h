// The backend's compute shaders, compiled from src/backend/vulkan/shaders/*.comp by glslc at build
// time and embedded as SPIR-V (cmake/embed_spirv.cmake). A module's name is its file's stem, plus
// _<variant> for shaders built once per weight format (matmul_gemv_q: the grouped-int8 format; matmul_gemv_q4_0: Q4_0's own blocks).
#pragma once
#include <span>
#include <string_view>

namespace pagoda::backend::vulkan {

// The SPIR-V bytes of a module, empty when the build has no module of that name.
std::span<const unsigned char> shader_module(std::string_view name);

}  // namespace pagoda::backend::vulkan
