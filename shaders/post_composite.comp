// post_composite.comp: the HDR image the display is made from, still linear: scene + bloom x
// intensity, then (FEEDBACK) the previous frame's, warped and faded, kept where it is brighter:
//
//     new = max(current, background + feedback x (min(warped previous, HISTORY_MAX) - background))
//
// Bounded whatever the parameters: the history read back is clamped to HISTORY_MAX, and with
// 0 <= feedback < 1 and background <= HISTORY_MAX the faded term is at most HISTORY_MAX, so
// every frame's result is at most max(this frame's scene + bloom, HISTORY_MAX). Where the
// scene is background, the old image fades towards the background by `feedback` a frame.
// BLOOM and FEEDBACK (0 or 1) are #defines from visual/post/post_chain.py.
#include "post_common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;
layout(binding = 0) uniform sampler2D u_scene;    // the HDR scene, pixel for pixel
#if BLOOM
layout(binding = 1) uniform sampler2D u_bloom;    // bloom level 0, half resolution
#endif
#if FEEDBACK
layout(binding = 2) uniform sampler2D u_history;  // last frame's result (linear, clamp to edge)
#endif
layout(rgba16f, binding = 0) writeonly uniform image2D u_out;

void main() {
    ivec2 pixel = ivec2(gl_GlobalInvocationID.xy);
    ivec2 size = imageSize(u_out);
    if (any(greaterThanEqual(pixel, size))) return;
    vec2 uv = (vec2(pixel) + 0.5) / vec2(size);
    vec3 color = scene_texel(u_scene, pixel);
#if BLOOM
    color += post.bloom_intensity * tent(u_bloom, uv);
#endif
#if FEEDBACK
    vec2 from = mat2(post.warp.xy, post.warp.zw) * (uv - 0.5) + 0.5 + post.warp_offset;
    vec3 previous = min(safe_hdr(texture(u_history, from).rgb), vec3(HISTORY_MAX));
    vec3 background = post.feedback_background;
    color = max(color, background + post.feedback_fade * (previous - background));
#endif
    imageStore(u_out, pixel, vec4(safe_hdr(color), 1.0));
}
