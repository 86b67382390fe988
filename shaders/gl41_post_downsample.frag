// The GL 4.1 post chain's downsample pass (visual/post/post_chain41.py), a fragment pass; the compute chain's
// post_downsample.comp does the same work (they were this file before commit 340894d).
// Samplers' units are set from Python (GLSL 4.10 has no binding =).
// one bloom level to the next, half the size: the 13-tap filter of
// Jimenez 2014 (Call of Duty: Advanced Warfare), bilinear taps from the finer level. It is a
// mix of 4x4 texel boxes (the centre one 0.5, four shifted by two texels 0.125 each) whose
// weights sum to 1, each giving every texel 1/4 of its value over the coarser level's pixels:
// the integral (value x area) passes down unchanged (up to the clamped edges).
#include "post_common.glsl"

uniform sampler2D u_source;  // the finer level (linear, clamp to edge)

in vec2 v_uv;
out vec4 f_color;

vec3 tap(vec2 offset) {
    return texture(u_source, v_uv + offset / vec2(textureSize(u_source, 0))).rgb;
}

void main() {
    vec3 a = tap(vec2(-2.0, 2.0)), b = tap(vec2(0.0, 2.0)), c = tap(vec2(2.0, 2.0));
    vec3 d = tap(vec2(-2.0, 0.0)), e = tap(vec2(0.0, 0.0)), f = tap(vec2(2.0, 0.0));
    vec3 g = tap(vec2(-2.0, -2.0)), h = tap(vec2(0.0, -2.0)), i = tap(vec2(2.0, -2.0));
    vec3 j = tap(vec2(-1.0, 1.0)), k = tap(vec2(1.0, 1.0));
    vec3 l = tap(vec2(-1.0, -1.0)), m = tap(vec2(1.0, -1.0));
    vec3 color = e * 0.125 + (a + c + g + i) * 0.03125 + (b + d + f + h) * 0.0625
               + (j + k + l + m) * 0.125;
    f_color = vec4(color, 1.0);
}
