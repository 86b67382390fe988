// gl41_cull.vert: seed 000's CSCull without compute: one vertex an agent (gl_VertexID), the
// geometry shader (gl41_cull.geom) keeping those of this list (NEAR: visible and near, else
// visible and far), whose indices transform feedback appends, in agent order, to the list the
// indirect draw reads as a per-instance attribute.
#include "gl41_state.glsl"
#include "gl41_cull.glsl"

uniform sampler2D agent_positions;

flat out int v_keep;
flat out uint v_index;

void main() {
    vec3 p = texelFetch(agent_positions, state_texel(gl_VertexID), 0).xyz;
    bool keep = gl_VertexID < int(frame.agent_count) && cull_inside(p);
#if NEAR
    keep = keep && !cull_far(p);
#else
    keep = keep && cull_far(p);
#endif
    v_keep = keep ? 1 : 0;
    v_index = uint(gl_VertexID);
}
