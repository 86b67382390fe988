// cull.comp: seed 000's CSCull (part 6) for the indirect draw, plus the near-lure count.
// Each agent is tested against the six frustum planes (a sphere of agent_size: the meshes lie
// within 1 of the agent). Visible agents are appended to one of two lists by distance from the
// camera (the level of detail): near ones to visible[0 ..), drawn as the shape's mesh, far ones
// to visible[far_base ..), drawn as one point. Appending uses ONE global atomic per list per
// workgroup: invocations take a slot with an atomic on shared memory, one invocation adds the
// workgroup's total to the global count, and everyone writes at that base + their slot. The
// near-lure count (the seed's damage hook) is aggregated the same way, and so are the sums (in
// fixed point, relative to center) of the agents' offsets and squared distances, from which the
// renderer gets the swarm's centre and RMS radius for the camera to frame it. What it reads is in
// the FrameParams block (frame.*).
// With STABLE (reproducible runs: --dt, --render) the lists come out in the same order every run:
// workgroups finish in any order, and additive light summed in another order rounds differently.
// This pass then writes each agent's list (classes[]) and its workgroup's two counts (groups[])
// instead of the lists; cull_scan.comp turns the counts into each workgroup's first places and
// cull_place.comp writes the indices there, in agent order. The counts and sums are the same.
#include "common.glsl"
#include "frame_params.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) readonly buffer Agents { Agent agents[]; };
layout(std430, binding = 1) writeonly buffer Visible { uint visible[]; };
#if STABLE
layout(std430, binding = 3) writeonly buffer Classes { uint classes[]; };  // 0 none, 1 near, 2 far
layout(std430, binding = 4) writeonly buffer Groups { uint groups[]; };  // (near, far) a group
#endif

// Two DrawArraysIndirectCommand, padded to 5 uints each because moderngl's render_indirect
// reads commands with a 20-byte stride:
//     struct DrawArraysIndirectCommand {
//         uint count;          // vertices of the mesh (the shape's, or 1: a point)
//         uint instanceCount;  // visible agents of this level of detail: written here
//         uint first;          // the mesh's first vertex in the shared mesh buffer
//         uint baseInstance;   // 0
//         uint pad;            // 0
//     };
// draw[0..4] is the near (mesh) command, draw[5..9] the far (point) one. The renderer
// resets the instance counts and the sums after them to 0 (a GPU copy) before this pass.
layout(std430, binding = 2) buffer DrawState {
    uint draw[10];
    uint near_lure;
    uint spread;    // sum of round(min(|p - center|^2, spread_max) * spread_scale)
    uint offset[3]; // sums of round((clamp(p - center, -reach, reach) + reach)
                    //               * offset_scale), per axis
    uint pad;
};

shared uint s_near;
shared uint s_far;
shared uint s_lure;
shared uint s_spread;
shared uint s_offset[3];
shared uint s_near_base;
shared uint s_far_base;

void main() {
    uint i = global_index();
    uint t = gl_LocalInvocationIndex;
    if (t == 0u) {
        s_near = 0u;
        s_far = 0u;
        s_lure = 0u;
        s_spread = 0u;
        s_offset[0] = 0u;
        s_offset[1] = 0u;
        s_offset[2] = 0u;
    }
    barrier();

    // No early return: every invocation must reach every barrier.
    bool in_range = i < frame.agent_count;
    bool inside = in_range;
    bool is_far = false;
    uint slot = 0u;
    if (in_range) {
        vec3 p = agents[i].position.xyz;
        float radius = frame.agent_size * frame.cull_scale;  // meshes lie within it
        for (int k = 0; k < 6; k++)
            inside = inside && dot(frame.planes[k].xyz, p) + frame.planes[k].w >= -radius;
        vec3 to_lure = p - frame.lure;
        if (dot(to_lure, to_lure) <= frame.lure_radius * frame.lure_radius) atomicAdd(s_lure, 1u);
        vec3 from_center = p - frame.center;
        float d2 = dot(from_center, from_center);
        d2 = d2 < frame.spread_max ? d2 : frame.spread_max;  // also turns NaN into the clamp
        atomicAdd(s_spread, uint(d2 * frame.spread_scale + 0.5));
        float reach = frame.reach;
        vec3 offset = (clamp(from_center, -reach, reach) + reach) * frame.offset_scale + 0.5;
        if (!all_finite(offset)) offset = vec3(reach * frame.offset_scale);
        atomicAdd(s_offset[0], uint(offset.x));
        atomicAdd(s_offset[1], uint(offset.y));
        atomicAdd(s_offset[2], uint(offset.z));
        if (inside) {
            vec3 to_camera = p - frame.eye;
            is_far = dot(to_camera, to_camera) > frame.lod_distance * frame.lod_distance;
            slot = is_far ? atomicAdd(s_far, 1u) : atomicAdd(s_near, 1u);
        }
    }
    barrier();

    if (t == 0u) {
        s_near_base = s_near > 0u ? atomicAdd(draw[1], s_near) : 0u;
        s_far_base = s_far > 0u ? atomicAdd(draw[6], s_far) : 0u;
        if (s_lure > 0u) atomicAdd(near_lure, s_lure);
        if (s_spread > 0u) atomicAdd(spread, s_spread);
        for (int k = 0; k < 3; k++)
            if (s_offset[k] > 0u) atomicAdd(offset[k], s_offset[k]);
    }
    barrier();

#if STABLE
    if (in_range) classes[i] = inside ? (is_far ? 2u : 1u) : 0u;
    if (t == 0u) {
        uint group = i / uint(LOCAL_SIZE);
        groups[2u * group] = s_near;
        groups[2u * group + 1u] = s_far;
    }
#else
    if (inside) {
        if (is_far) visible[frame.far_base + s_far_base + slot] = i;
        else visible[s_near_base + slot] = i;
    }
#endif
}
