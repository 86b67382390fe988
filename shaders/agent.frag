// agent.frag: the already lit colour of the agent (lighting is per face, in agent.vert). The
// BILLBOARD variant: a streak fades along its length and across, a glow is a soft round point
// (opaque, with depth, both keep only their brighter core: a dark fringe would hide what lies
// behind). POINTS (far agents): a round point, soft for glows and streaks.
#include "frame_params.glsl"

flat in vec3 v_color;
#if BILLBOARD && !POINTS
in vec2 v_uv;
#endif

out vec4 f_color;

void main() {
#if POINTS
    vec2 q = gl_PointCoord * 2.0 - 1.0;  // a point of one or two pixels is always whole
    float r2 = dot(q, q);
    if (r2 > 1.0) discard;
#if BILLBOARD
    float light = exp(-4.0 * r2) - exp(-4.0);
    if (frame.additive == 0) light = 0.5 + 0.5 * light;
#else
    float light = 1.0;
#endif
    f_color = vec4(v_color * light, 1.0);
#elif BILLBOARD
    float light;
    if (frame.shape_index == 3) {  // glow: a gaussian spot, cut at the quad's inscribed circle
        float r2 = dot(v_uv, v_uv);
        if (r2 > 1.0) discard;
        light = exp(-4.0 * r2) - exp(-4.0);
    } else {                       // streak: bright at the head (x = 1), fading to the tail
        light = (1.0 - v_uv.y * v_uv.y) * (0.1 + 0.9 * (0.5 + 0.5 * v_uv.x));
    }
    if (frame.additive == 0) {
        if (light < 0.3) discard;
        light = 0.5 + 0.5 * light;
    }
    f_color = vec4(v_color * light, 1.0);
#else
    f_color = vec4(v_color, 1.0);
#endif
}
