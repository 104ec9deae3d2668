// Shared by every shader: buffers are reached through device addresses passed as push constants
// (no descriptor sets, no per-binding size limit), as float, uint or int arrays.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Uints { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };

// tanh from one exp of a non-positive argument: finite for every input (a direct
// (e^2x - 1) / (e^2x + 1) overflows to inf / inf for large x).
float safe_tanh(float x) {
    const float t = exp(-2.0 * abs(x));
    const float r = (1.0 - t) / (1.0 + t);
    return x < 0.0 ? -r : r;
}

// Index of this invocation over a grid that may use y for more than 65535 workgroups of x.
uint flat_invocation(uint local_size) {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * local_size;
}
