// post_upscale.frag: under a render scale (show/governor.py), the display pass's picture (RGBA8,
// the scene's size) scaled up onto the target, bilinear: tone mapped before it is scaled, so the
// display pass runs on the scene's pixels, not the target's (on software GL it cost as much at
// any scale: 7 ms at 1280x720).
#include "post_common.glsl"

SAMPLER_AT(0) uniform sampler2D u_scene;  // the display pass's picture, smaller than the target

in vec2 v_uv;
out vec4 f_color;

void main() {
    f_color = vec4(texture(u_scene, v_uv).rgb, 1.0);
}
