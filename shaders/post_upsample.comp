// post_upsample.comp: the coarser (already accumulated) bloom level, tent-upsampled, mixed into
// the finer one: finer = (1 - mix) x finer + mix x tent(coarser). Both terms keep the
// integral, and the weights sum to 1: the chain's result is a convex mix of the levels,
// (1 - mix) mix^i for level i and mix^n for the last.
#include "post_common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;
layout(binding = 0) uniform sampler2D u_source;  // the coarser level (linear, clamp to edge)
layout(rgba16f, binding = 0) uniform image2D u_finer;  // read and written, texel by texel

void main() {
    ivec2 pixel = ivec2(gl_GlobalInvocationID.xy);
    ivec2 size = imageSize(u_finer);
    if (any(greaterThanEqual(pixel, size))) return;
    vec2 uv = (vec2(pixel) + 0.5) / vec2(size);
    vec3 finer = imageLoad(u_finer, pixel).rgb;
    vec3 color = (1.0 - post.bloom_mix) * finer + post.bloom_mix * tent(u_source, uv);
    imageStore(u_finer, pixel, vec4(color, 1.0));
}
