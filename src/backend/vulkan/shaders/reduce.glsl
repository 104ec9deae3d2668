// A workgroup's sum or max of one float per invocation, for one-workgroup-per-row shaders
// (rms_norm, softmax, attention's chunk max and sum). Built with -DSUBGROUP=1 (the *_subgroup modules, made only for a device that
// reports GL_KHR_shader_subgroup_arithmetic in compute), the spec constant SUBGROUP_REDUCE (id 1)
// picks subgroupAdd/subgroupMax within each subgroup then across the subgroups' partials; 0 (and
// every module built without SUBGROUP) keeps the fixed-order tree in shared memory. Either way a
// row's result depends only on that row (batch invariance); the two paths may differ in the last bit.
// Needs `WG` (the workgroup size, a power of two <= 256) declared before the include.
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(constant_id = 1) const uint SUBGROUP_REDUCE = 0;
#else
const uint SUBGROUP_REDUCE = 0;
#endif
shared float reduce_part[256];

float workgroup_reduce(float v, bool is_max) {
    const uint lid = gl_LocalInvocationID.x;
#ifdef SUBGROUP
    if (SUBGROUP_REDUCE != 0u) {
        v = is_max ? subgroupMax(v) : subgroupAdd(v);
        if (subgroupElect()) reduce_part[gl_SubgroupID] = v;
        barrier();
        float r = is_max ? -1.0 / 0.0 : 0.0;
        if (gl_SubgroupID == 0u) {
            // The first subgroup folds the partials, gl_SubgroupSize at a time.
            for (uint i0 = 0; i0 < gl_NumSubgroups; i0 += gl_SubgroupSize) {
                const uint i = i0 + gl_SubgroupInvocationID;
                const float p = i < gl_NumSubgroups ? reduce_part[i] : (is_max ? -1.0 / 0.0 : 0.0);
                const float s = is_max ? subgroupMax(p) : subgroupAdd(p);
                r = is_max ? max(r, s) : r + s;
            }
            if (subgroupElect()) reduce_part[0] = r;
        }
        barrier();
        r = reduce_part[0];
        barrier();  // reduce_part is free for the next call
        return r;
    }
#endif
    reduce_part[lid] = v;
    barrier();
    for (uint h = WG / 2u; h > 0u; h /= 2u) {
        if (lid < h) reduce_part[lid] = is_max ? max(reduce_part[lid], reduce_part[lid + h]) : reduce_part[lid] + reduce_part[lid + h];
        barrier();
    }
    const float r = reduce_part[0];
    barrier();
    return r;
}
