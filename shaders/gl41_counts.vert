// gl41_counts.vert: what cull.comp counts with atomics, added up by blending instead: one point
// an agent onto texel k % COUNT_LANES of two RGBA32F targets COUNT_LANES wide (blending ONE,
// ONE; spread over texels so that a million blends do not queue on one pixel, and summed in
// order by gl41_words.frag). in_near and
// in_far are the two lists' entries k (cleared to 0xffffffff before the cull pass, so an entry
// the cull appended is one that is not that): their number is the lists' lengths, exactly.
// Every agent adds whether it is near the lure, its squared distance from frame.center
// (clamped, scaled: cull.comp's fixed point, unrounded) and its clamped offset from it.
#include "common.glsl"
#include "gl41_state.glsl"
#include "frame_params.glsl"

uniform sampler2D agent_positions;

in uint in_near;
in uint in_far;

flat out vec4 v_counts;   // near entry, far entry, near the lure, spread term
flat out vec4 v_offset;   // clamp(p - center, -reach, reach)

void main() {
    vec3 p = texelFetch(agent_positions, state_texel(gl_VertexID), 0).xyz;
    vec3 to_lure = p - frame.lure;
    float lure = dot(to_lure, to_lure) <= frame.lure_radius * frame.lure_radius ? 1.0 : 0.0;
    vec3 from_center = p - frame.center;
    float d2 = dot(from_center, from_center);
    d2 = d2 < frame.spread_max ? d2 : frame.spread_max;  // also turns NaN into the clamp
    vec3 offset = clamp(from_center, -frame.reach, frame.reach);
    if (!all_finite(offset)) offset = vec3(0.0);
    v_counts = vec4(in_near != 0xffffffffu ? 1.0 : 0.0, in_far != 0xffffffffu ? 1.0 : 0.0,
                    lure, d2 * frame.spread_scale);
    v_offset = vec4(offset, 0.0);
    float lane = float(gl_VertexID % COUNT_LANES) + 0.5;
    gl_Position = vec4(lane / float(COUNT_LANES) * 2.0 - 1.0, 0.0, 0.0, 1.0);
    gl_PointSize = 1.0;
}
