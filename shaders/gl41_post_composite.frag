// The GL 4.1 post chain's composite pass (visual/post/post_chain41.py), a fragment pass; the compute chain's
// post_composite.comp does the same work (they were this file before commit 340894d).
// Samplers' units are set from Python (GLSL 4.10 has no binding =).
// the HDR image the display is made from, still linear: scene + bloom x
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

uniform sampler2D u_scene;    // the HDR scene, pixel for pixel
#if BLOOM
uniform sampler2D u_bloom;    // bloom level 0, half resolution
#endif
#if FEEDBACK
uniform sampler2D u_history;  // last frame's result (linear, clamp to edge)
#endif

in vec2 v_uv;
out vec4 f_color;

void main() {
    vec3 color = scene_texel(u_scene, ivec2(gl_FragCoord.xy));
#if BLOOM
    color += post.bloom_intensity * tent(u_bloom, v_uv);
#endif
#if FEEDBACK
    vec2 from = mat2(post.warp.xy, post.warp.zw) * (v_uv - 0.5) + 0.5 + post.warp_offset;
    vec3 previous = min(safe_hdr(texture(u_history, from).rgb), vec3(HISTORY_MAX));
    vec3 background = post.feedback_background;
    color = max(color, background + post.feedback_fade * (previous - background));
#endif
    f_color = vec4(safe_hdr(color), 1.0);
}
