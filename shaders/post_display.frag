// post_display.frag: the HDR image (+ bloom x intensity where BLOOM) to the display: exposure,
// tone mapping, the sRGB transfer, dither of +-1 step of an 8-bit target. Exact black stays
// exact black: dither only touches values at least half a step above 0. Pixel for pixel (under
// a render scale, post_upscale.frag scales the result up). OPERATOR: the tone map
// (TONEMAP_ACES, _AGX or _LINEAR), fixed when compiled.
#include "post_common.glsl"
#include "post_tonemap.glsl"

SAMPLER_AT(0) uniform sampler2D u_scene;  // HDR, pixel for pixel
#if BLOOM
SAMPLER_AT(1) uniform sampler2D u_bloom;  // bloom level 0, half resolution
#endif

in vec2 v_uv;
out vec4 f_color;

void main() {
    vec3 color = scene_texel(u_scene, ivec2(gl_FragCoord.xy));
#if BLOOM
    color += post.bloom_intensity * tent(u_bloom, v_uv);
#endif
    color = tonemap_encoded(color * post.exposure, OPERATOR);
    vec3 lit = step(vec3(0.5 / 255.0), color);
    color = clamp(color + lit * (post.dither * dither_noise(gl_FragCoord.xy) / 255.0), 0.0, 1.0);
    f_color = vec4(color, 1.0);
}
