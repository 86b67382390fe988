// gl41_spawn.frag: a resize's new agents, texel k agent k spawned as the guard respawns
// (boids.glsl respawn); gl41_scatter.vert then puts the kept agents over them by id.
#include "boids.glsl"
#include "gl41_state.glsl"

layout(location = 0) out vec4 f_position;
layout(location = 1) out vec4 f_velocity;

void main() {
    Agent a = respawn(uint(texel_index(ivec2(gl_FragCoord.xy))));
    f_position = a.position;
    f_velocity = a.velocity;
}
