// post_common.glsl: helpers shared by the post chain's passes (visual/post/post_chain.py).
// HDR_MAX (from Python) keeps every value finite in a half-float texture; every pass reads this
// frame's values from the PostParams block (post.*, visual/gpu/uniforms.py).
#include "post_params.glsl"

// A sampler's texture unit: in its layout, or on GLSL 4.10 (no `binding =`) set from Python.
#ifdef GL41
#define SAMPLER_AT(unit)
#else
#define SAMPLER_AT(unit) layout(binding = unit)
#endif

// A value safe to filter and store: NaN and negatives become 0, +inf becomes HDR_MAX.
vec3 safe_hdr(vec3 color) {
    bvec3 bad = isnan(color);
    color = vec3(bad.r ? 0.0 : color.r, bad.g ? 0.0 : color.g, bad.b ? 0.0 : color.b);
    return clamp(color, vec3(0.0), vec3(HDR_MAX));
}

// The scene's texel at `pixel`, pixel for pixel (edges clamped).
vec3 scene_texel(sampler2D scene, ivec2 pixel) {
    ivec2 last = textureSize(scene, 0) - 1;
    return safe_hdr(texelFetch(scene, clamp(pixel, ivec2(0), last), 0).rgb);
}

// A 3x3 tent (1 2 1 / 2 4 2 / 1 2 1, / 16) of bilinear taps one texel of `image` apart: the
// upsample filter of Jimenez 2014. Its weights sum to 1, and each tap is a bilinear upsample,
// which keeps the image's integral (value x area), so the tent keeps it too.
vec3 tent(sampler2D image, vec2 uv) {
    vec2 t = 1.0 / vec2(textureSize(image, 0));
    vec3 sum = texture(image, uv).rgb * 4.0;
    sum += (texture(image, uv + vec2(-t.x, 0.0)).rgb + texture(image, uv + vec2(t.x, 0.0)).rgb
            + texture(image, uv + vec2(0.0, -t.y)).rgb
            + texture(image, uv + vec2(0.0, t.y)).rgb) * 2.0;
    sum += texture(image, uv + vec2(-t.x, -t.y)).rgb + texture(image, uv + vec2(t.x, -t.y)).rgb
         + texture(image, uv + vec2(-t.x, t.y)).rgb + texture(image, uv + vec2(t.x, t.y)).rgb;
    return sum * (1.0 / 16.0);
}
