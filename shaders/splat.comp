// splat.comp: far agents drawn by a compute pass instead of the rasteriser (the H200's raster
// front end is modest: 4M points took 8 ms there). Each far agent of cull.comp's far list
// covers the pixels a GL point of its size would (centres within half its size of the
// point's centre; the point is dropped when its centre is outside the clip volume, as GL
// drops a point), lit as agent.vert/agent.frag light it (agent_color.glsl, the soft round
// spot of glows and streaks). Per pixel, `splat` holds:
//     opaque    one uint: ~(the nearest depth's float bits with the agent's low index bits
//               below them); SPLAT_DEPTH keeps the largest (atomicMax: the nearest), then
//               SPLAT_COLOR: the agent that won writes its colour into the image and sets the
//               pixel back to 0 (empty; only the winner's key ever matches it)
//     additive  three uints: the light of every agent there in fixed point (SPLAT_SCALE a
//               unit), added in any order with the same result; splat_resolve.comp adds
//               them into the image and sets them back to 0
// Dispatched indirectly, over the far list only (splat_args.comp sizes the dispatches from
// the count cull.comp wrote). Near agents are drawn after, by the rasteriser, over what this
// wrote (nearer than any far agent on that pixel).
#include "common.glsl"
#include "frame_params.glsl"
#include "agent_color.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) readonly buffer Agents { Agent agents[]; };
layout(std430, binding = 1) readonly buffer Visible { uint visible[]; };
layout(std430, binding = 2) readonly buffer DrawState { uint draw[10]; };  // draw[6]: far count
layout(std430, binding = 3) buffer Splat { uint splat[]; };
#if SPLAT_COLOR
layout(rgba16f, binding = 0) writeonly uniform image2D u_image;
#endif

uint depth_key(float w, uint index) {
    return ~((floatBitsToUint(w) & 0xfffffe00u) | (index & 0x1ffu));
}

void main() {
    uint k = global_index();
    if (k >= draw[6]) return;
    uint index = visible[frame.far_base + k];
    Agent agent = agents[index];
    vec4 clip = frame.view_projection * vec4(agent.position.xyz, 1.0);
    if (clip.w <= 1e-6 || any(greaterThan(abs(clip.xyz), vec3(clip.w)))) return;
    ivec2 size = ivec2(frame.viewport);
    vec2 centre = (clip.xy / clip.w * 0.5 + 0.5) * vec2(size);
    float ratio = length(agent.velocity.xyz) / max(frame.max_speed, 1e-6);
    float point = clamp(frame.point_scale * frame.agent_size
                        * (1.0 + frame.size_by_speed * min(ratio, 1.5)) / clip.w, 1.0, 64.0);
    float r = 0.5 * point;
    ivec2 lo = max(ivec2(floor(centre - r)), ivec2(0));
    ivec2 hi = min(ivec2(ceil(centre + r)), size - 1);
#if SPLAT_DEPTH
    uint key = depth_key(clip.w, index);
#else
    vec3 color = agent_color(agent, normalize(frame.eye - agent.position.xyz));
#if SPLAT_COLOR
    uint key = depth_key(clip.w, index);
#endif
#endif
    for (int y = lo.y; y <= hi.y; y++) {
        for (int x = lo.x; x <= hi.x; x++) {
            vec2 q = (vec2(x, y) + 0.5 - centre) / r;
            float r2 = dot(q, q);
            if (r2 > 1.0) continue;
            uint pixel = uint(y * size.x + x);
#if SPLAT_DEPTH
            if (splat[pixel] < key) atomicMax(splat[pixel], key);
#else
#if BILLBOARD
            float light = exp(-4.0 * r2) - exp(-4.0);
            if (frame.additive == 0) light = 0.5 + 0.5 * light;
#else
            float light = 1.0;
#endif
#if SPLAT_COLOR
            if (splat[pixel] == key) {
                imageStore(u_image, ivec2(x, y), vec4(color * light, 1.0));
                splat[pixel] = 0u;
            }
#else
            uvec3 fixed_point = uvec3(color * light * SPLAT_SCALE + 0.5);
            if (fixed_point.r != 0u) atomicAdd(splat[3u * pixel], fixed_point.r);
            if (fixed_point.g != 0u) atomicAdd(splat[3u * pixel + 1u], fixed_point.g);
            if (fixed_point.b != 0u) atomicAdd(splat[3u * pixel + 2u], fixed_point.b);
#endif
#endif
        }
    }
}
