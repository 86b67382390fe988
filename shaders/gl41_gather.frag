// gl41_gather.frag: the agents written in cell order: texel k takes the agent the sorted pair
// k names (its index in the unsorted state). Past the count: nothing (never read).
#include "gl41_state.glsl"
#include "swarm_params.glsl"

uniform usampler2D pairs;
uniform sampler2D agent_positions;
uniform sampler2D agent_velocities;

layout(location = 0) out vec4 f_position;
layout(location = 1) out vec4 f_velocity;

void main() {
    int k = texel_index(ivec2(gl_FragCoord.xy));
    if (k >= int(swarm.agent_count)) discard;
    int source = int(texelFetch(pairs, state_texel(k), 0).y);
    Agent a = fetch_agent(agent_positions, agent_velocities, source);
    f_position = a.position;
    f_velocity = a.velocity;
}
