// post_downsample.comp: one bloom level to the next, half the size: the 13-tap filter of
// Jimenez 2014 (Call of Duty: Advanced Warfare), bilinear taps from the finer level. It is a
// mix of 4x4 texel boxes (the centre one 0.5, four shifted by two texels 0.125 each) whose
// weights sum to 1, each giving every texel 1/4 of its value over the coarser level's pixels:
// the integral (value x area) passes down unchanged (up to the clamped edges).
#include "post_common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;
layout(binding = 0) uniform sampler2D u_source;  // the finer level (linear, clamp to edge)
layout(rgba16f, binding = 0) writeonly uniform image2D u_out;  // the coarser level

vec3 tap(vec2 uv, vec2 offset) {
    return texture(u_source, uv + offset / vec2(textureSize(u_source, 0))).rgb;
}

void main() {
    ivec2 pixel = ivec2(gl_GlobalInvocationID.xy);
    ivec2 size = imageSize(u_out);
    if (any(greaterThanEqual(pixel, size))) return;
    vec2 uv = (vec2(pixel) + 0.5) / vec2(size);
    vec3 a = tap(uv, vec2(-2.0, 2.0)), b = tap(uv, vec2(0.0, 2.0)), c = tap(uv, vec2(2.0, 2.0));
    vec3 d = tap(uv, vec2(-2.0, 0.0)), e = tap(uv, vec2(0.0, 0.0)), f = tap(uv, vec2(2.0, 0.0));
    vec3 g = tap(uv, vec2(-2.0, -2.0)), h = tap(uv, vec2(0.0, -2.0)), i = tap(uv, vec2(2.0, -2.0));
    vec3 j = tap(uv, vec2(-1.0, 1.0)), k = tap(uv, vec2(1.0, 1.0));
    vec3 l = tap(uv, vec2(-1.0, -1.0)), m = tap(uv, vec2(1.0, -1.0));
    vec3 color = e * 0.125 + (a + c + g + i) * 0.03125 + (b + d + f + h) * 0.0625
               + (j + k + l + m) * 0.125;
    imageStore(u_out, pixel, vec4(color, 1.0));
}
