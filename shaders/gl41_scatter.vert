// gl41_scatter.vert: a resize keeps every agent whose id is below the new count, at texel id
// (ids stay 0..count-1, unique), one point an old agent; the others are clipped away.
// STATE_ROWS of the new state texture: a #define (the pass is built for each size).
#include "gl41_state.glsl"
#include "swarm_params.glsl"

uniform sampler2D agent_positions;
uniform sampler2D agent_velocities;

flat out vec4 v_position;
flat out vec4 v_velocity;

void main() {
    Agent a = fetch_agent(agent_positions, agent_velocities, gl_VertexID);
    int id = int(a.position.w);
    vec2 texel = vec2(state_texel(id)) + 0.5;
    vec2 ndc = texel / vec2(float(STATE_WIDTH), float(STATE_ROWS)) * 2.0 - 1.0;
    gl_Position = uint(id) < swarm.agent_count ? vec4(ndc, 0.0, 1.0) : vec4(2.0, 2.0, 2.0, 1.0);
    gl_PointSize = 1.0;
    v_position = a.position;
    v_velocity = a.velocity;
}
