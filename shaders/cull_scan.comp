// cull_scan.comp: the stable cull's second pass (see cull.comp, STABLE): the workgroups' (near,
// far) counts in groups[] become each workgroup's first place in the near and far lists (an
// exclusive prefix sum, in workgroup order). One workgroup: each invocation sums a run of
// consecutive groups, the runs' totals are scanned in shared memory (Hillis-Steele), and each
// invocation writes its run's places. The totals are the cull's instance counts already.
#include "common.glsl"
#include "frame_params.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 4) buffer Groups { uint groups[]; };  // counts in, first places out

shared uvec2 s_sum[LOCAL_SIZE];

void main() {
    uint t = gl_LocalInvocationIndex;
    uint group_count = (frame.agent_count + uint(CULL_LOCAL_SIZE) - 1u) / uint(CULL_LOCAL_SIZE);
    uint run = (group_count + uint(LOCAL_SIZE) - 1u) / uint(LOCAL_SIZE);
    uint first = min(t * run, group_count);
    uint last = min(first + run, group_count);
    uvec2 total = uvec2(0u);
    for (uint g = first; g < last; g++)
        total += uvec2(groups[2u * g], groups[2u * g + 1u]);
    s_sum[t] = total;
    barrier();
    for (uint step = 1u; step < uint(LOCAL_SIZE); step <<= 1u) {
        uvec2 before = t >= step ? s_sum[t - step] : uvec2(0u);
        barrier();
        s_sum[t] += before;
        barrier();
    }
    uvec2 place = s_sum[t] - total;  // exclusive: the groups of the runs before this one
    for (uint g = first; g < last; g++) {
        uvec2 count = uvec2(groups[2u * g], groups[2u * g + 1u]);
        groups[2u * g] = place.x;
        groups[2u * g + 1u] = place.y;
        place += count;
    }
}
