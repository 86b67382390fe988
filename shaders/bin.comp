// bin.comp: count the agents of an unsorted buffer into grid cells, keeping each one's cell and
// rank (used when a state is loaded and when the grid changes shape; a step's simulation pass
// counts its own output). Afterwards scan.comp, scatter.comp and order.comp sort them.
#define GRID_COUNTS
#include "common.glsl"
#include "grid.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 1) readonly buffer Agents { Agent agents[]; };
layout(std430, binding = 4) writeonly buffer AgentCell { uvec2 agent_cell[]; };  // cell, rank

void main() {
    uint i = global_index();
    if (i >= swarm.agent_count) return;
    uint cell = grid_index(grid_cell(agents[i].position.xyz));
    agent_cell[i] = uvec2(cell, count_into(cell, 1u));
}
