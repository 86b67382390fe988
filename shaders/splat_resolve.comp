// splat_resolve.comp: after splat.comp, one invocation a pixel: the added light (additive:
// three fixed-point uints a pixel) goes into the image, and the pixel's splat state is set
// back to empty (0) for the next frame, in both modes.
#include "frame_params.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 3) buffer Splat { uint splat[]; };
layout(rgba16f, binding = 0) uniform image2D u_image;

void main() {
    ivec2 xy = ivec2(gl_GlobalInvocationID.xy);
    ivec2 size = ivec2(frame.viewport);
    if (any(greaterThanEqual(xy, size))) return;
    uint pixel = uint(xy.y * size.x + xy.x);
#if SPLAT_ADDITIVE
    uvec3 sum = uvec3(splat[3u * pixel], splat[3u * pixel + 1u], splat[3u * pixel + 2u]);
    if (any(notEqual(sum, uvec3(0u)))) {
        vec4 shown = imageLoad(u_image, xy);
        imageStore(u_image, xy, vec4(shown.rgb + vec3(sum) / SPLAT_SCALE, shown.a));
        splat[3u * pixel] = 0u;
        splat[3u * pixel + 1u] = 0u;
        splat[3u * pixel + 2u] = 0u;
    }
#else
    if (splat[pixel] != 0u) splat[pixel] = 0u;
#endif
}
