// The GL 4.1 post chain's prefilter pass (visual/post/post_chain41.py), a fragment pass; the compute chain's
// post_prefilter.comp does the same work (they were this file before commit 340894d).
// Samplers' units are set from Python (GLSL 4.10 has no binding =).
// the first bloom level. Each scene texel keeps only its part above the
// threshold (a soft, quadratic knee), then a 4x4 texel filter (1 3 3 1) x (1 3 3 1) / 64 halves
// the resolution. That filter gives every texel a total weight of exactly 1/4 over the half
// resolution pixels (edges clamped included, for even sizes): the level's integral (value x
// area) is the above-threshold part's, and a bright point moving by one pixel moves its glow
// smoothly (no 2x2 box jumps). Thresholding each texel before filtering (not after) is what
// makes a single bright pixel bloom with all of its energy above the threshold.
#include "post_common.glsl"

uniform sampler2D u_source;  // the HDR scene, full resolution

out vec4 f_color;

vec3 above_threshold(vec3 color) {
    float brightness = max(color.r, max(color.g, color.b));
    float soft = clamp(brightness - post.threshold + post.knee, 0.0, 2.0 * post.knee);
    soft = soft * soft / (4.0 * post.knee + 1e-5);
    return color * (max(soft, brightness - post.threshold) / max(brightness, 1e-5));
}

void main() {
    const float weight[4] = float[4](1.0, 3.0, 3.0, 1.0);
    ivec2 last = textureSize(u_source, 0) - 1;
    ivec2 base = ivec2(gl_FragCoord.xy) * 2 - 1;
    vec3 sum = vec3(0.0);
    for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) {
            ivec2 texel = clamp(base + ivec2(i, j), ivec2(0), last);
            sum += weight[i] * weight[j]
                 * above_threshold(safe_hdr(texelFetch(u_source, texel, 0).rgb));
        }
    }
    f_color = vec4(sum * (1.0 / 64.0), 1.0);
}
