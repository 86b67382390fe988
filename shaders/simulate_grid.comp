// simulate_grid.comp: steer and integrate with neighbours from the uniform grid.
// agents_in is in cell order and cell_start[c] is where cell c begins in it, so each of the
// nine (y, z) rows of the 3x3x3 block around an agent is one contiguous range. The new state
// goes to agents_out in the same order; the new cell is counted (its rank kept) so that
// scatter.comp can write the next step's input, sorted, after scan.comp.
#include "boids.glsl"
#include "grid.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) readonly buffer AgentsIn { Agent agents_in[]; };
layout(std430, binding = 1) writeonly buffer AgentsOut { Agent agents_out[]; };
layout(std430, binding = 2) readonly buffer CellStart { uint cell_start[]; };
layout(std430, binding = 3) buffer CellCount { uint cell_count[]; };
layout(std430, binding = 4) writeonly buffer AgentRank { uint agent_rank[]; };

const ivec2 ROWS[9] = ivec2[9](ivec2(0, 0), ivec2(-1, 0), ivec2(1, 0), ivec2(0, -1),
                               ivec2(0, 1), ivec2(-1, -1), ivec2(1, -1), ivec2(-1, 1),
                               ivec2(1, 1));

void main() {
    uint i = global_index();
    if (i >= swarm.agent_count) return;
    Agent self = agents_in[i];
    float r2 = swarm.neighbor_radius * swarm.neighbor_radius;
    float s2 = swarm.separation_radius * swarm.separation_radius;
    Gather g = gather_begin();

    ivec3 c = grid_cell(self.position.xyz);
    ivec3 lo = max(c - 1, ivec3(0));
    ivec3 hi = min(c + 1, swarm.grid_dims - 1);
    // The agent's own row first, then the others: under a neighbour cap the nearest rows are
    // the ones examined, evenly on every side.
    // Candidates left to examine: neighbor_cap, or all of them (0, the seed).
    uint budget = swarm.neighbor_cap == 0u ? 0xffffffffu : swarm.neighbor_cap;
    for (int row = 0; row < 9 && budget > 0u; row++) {
        ivec2 yz = c.yz + ROWS[row];
        if (any(lessThan(yz, lo.yz)) || any(greaterThan(yz, hi.yz))) continue;
        uint first = cell_start[grid_index(ivec3(lo.x, yz))];
        uint last = cell_start[grid_index(ivec3(hi.x, yz)) + 1u];
        last = first + min(last - first, budget);
        budget -= last - first;
        for (uint j = first; j < last; j++) {
            if (j == i) continue;
            if (gather_position(g, self.position.xyz, agents_in[j].position.xyz, r2, s2))
                g.ali += agents_in[j].velocity.xyz;
        }
    }

    Agent o = steer_and_integrate(self, g);
    agents_out[i] = o;
    agent_rank[i] = atomicAdd(cell_count[grid_index(grid_cell(o.position.xyz))], 1u);
}
