// cull_place.comp: the stable cull's last pass (see cull.comp, STABLE): each visible agent's
// index written at its workgroup's first place (cull_scan.comp) plus its rank among the
// workgroup's agents of the same list, so both lists hold the visible agents in ascending order,
// whatever order the workgroups ran in. The ranks are an exclusive prefix sum in shared memory,
// taken by one invocation in a loop: two barriers instead of a parallel scan's sixteen, which
// software GL pays for dearly (a barrier there switches every invocation of the group).
#include "common.glsl"
#include "frame_params.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 1) writeonly buffer Visible { uint visible[]; };
layout(std430, binding = 3) readonly buffer Classes { uint classes[]; };  // 0 none, 1 near, 2 far
layout(std430, binding = 4) readonly buffer Groups { uint groups[]; };  // first places

shared uvec2 s_rank[LOCAL_SIZE];

void main() {
    uint i = global_index();
    uint t = gl_LocalInvocationIndex;
    uint list = i < frame.agent_count ? classes[i] : 0u;
    uvec2 mine = uvec2(list == 1u ? 1u : 0u, list == 2u ? 1u : 0u);
    s_rank[t] = mine;
    barrier();
    if (t == 0u) {
        uvec2 sum = uvec2(0u);
        for (uint k = 0u; k < uint(LOCAL_SIZE); k++) {
            uvec2 here = s_rank[k];
            s_rank[k] = sum;  // exclusive: this list's agents before agent k
            sum += here;
        }
    }
    barrier();
    uvec2 rank = s_rank[t];
    uint group = i / uint(LOCAL_SIZE);
    if (list == 1u) visible[groups[2u * group] + rank.x] = i;
    else if (list == 2u) visible[frame.far_base + groups[2u * group + 1u] + rank.y] = i;
}
