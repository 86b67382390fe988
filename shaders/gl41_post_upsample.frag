// The GL 4.1 post chain's upsample pass (visual/post/post_chain41.py), a fragment pass; the compute chain's
// post_upsample.comp does the same work (they were this file before commit 340894d).
// Samplers' units are set from Python (GLSL 4.10 has no binding =).
// the coarser (already accumulated) bloom level, tent-upsampled, mixed into
// the finer one by alpha blending (ONE, ONE_MINUS_SRC_ALPHA): finer = (1 - mix) x finer
// + mix x tent(coarser). Both terms keep the integral, and the weights sum to 1: the chain's
// result is a convex mix of the levels, (1 - mix) mix^i for level i and mix^n for the last.
#include "post_common.glsl"

uniform sampler2D u_source;  // the coarser level (linear, clamp to edge)

in vec2 v_uv;
out vec4 f_color;

void main() {
    f_color = vec4(post.bloom_mix * tent(u_source, v_uv), post.bloom_mix);
}
