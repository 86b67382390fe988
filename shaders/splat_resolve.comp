// splat_resolve.comp: after splat.comp with added light, one invocation a pixel (dispatched
// only when there are far agents: splat_args.comp): the three fixed-point sums of a pixel go
// into the image, and are set back to 0 (empty) for the next frame.
#include "frame_params.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 3) buffer Splat { uint splat[]; };
layout(rgba16f, binding = 0) uniform image2D u_image;

void main() {
    ivec2 xy = ivec2(gl_GlobalInvocationID.xy);
    ivec2 size = ivec2(frame.viewport);
    if (any(greaterThanEqual(xy, size))) return;
    uint pixel = uint(xy.y * size.x + xy.x);
    uvec3 sum = uvec3(splat[3u * pixel], splat[3u * pixel + 1u], splat[3u * pixel + 2u]);
    if (any(notEqual(sum, uvec3(0u)))) {
        vec4 shown = imageLoad(u_image, xy);
        imageStore(u_image, xy, vec4(shown.rgb + vec3(sum) / SPLAT_SCALE, shown.a));
        splat[3u * pixel] = 0u;
        splat[3u * pixel + 1u] = 0u;
        splat[3u * pixel + 2u] = 0u;
    }
}
