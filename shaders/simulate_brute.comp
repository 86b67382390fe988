// simulate_brute.comp: seed 000's tiled all-pairs CSSimulate (section 5.3). O(N^2): the
// reference the grid path is tested and benchmarked against. Reads agents_in, writes agents_out.
#include "boids.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) readonly buffer AgentsIn { Agent agents_in[]; };
layout(std430, binding = 1) writeonly buffer AgentsOut { Agent agents_out[]; };

shared Agent tile[LOCAL_SIZE];

void main() {
    uint i = global_index();
    uint gi = gl_LocalInvocationIndex;
    bool in_range = i < swarm.agent_count;
    Agent self;
    self.position = vec4(0.0);
    self.velocity = vec4(0.0);
    if (in_range) self = agents_in[i];
    float r2 = swarm.neighbor_radius * swarm.neighbor_radius;
    float s2 = swarm.separation_radius * swarm.separation_radius;
    Gather g = gather_begin();
    // Every invocation must reach every barrier: no early return before this loop.
    for (uint tile_start = 0u; tile_start < swarm.agent_count; tile_start += uint(LOCAL_SIZE)) {
        uint j = tile_start + gi;
        Agent loaded;
        loaded.position = vec4(0.0);
        loaded.velocity = vec4(0.0);
        if (j < swarm.agent_count) loaded = agents_in[j];
        tile[gi] = loaded;
        barrier();
        if (in_range) {
            uint tile_count = min(uint(LOCAL_SIZE), swarm.agent_count - tile_start);
            for (uint k = 0u; k < tile_count; k++) {
                if (tile_start + k == i) continue;
                if (gather_position(g, self.position.xyz, tile[k].position.xyz, r2, s2))
                    g.ali += tile[k].velocity.xyz;
            }
        }
        barrier();
    }
    if (!in_range) return;
    agents_out[i] = steer_and_integrate(self, g);
}
