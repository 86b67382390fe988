// bin.comp: count the agents of an unsorted buffer into grid cells (used when a state is
// loaded and when the grid changes shape). Afterwards scan.comp and scatter.comp sort them.
#include "common.glsl"
#include "grid.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 1) readonly buffer Agents { Agent agents[]; };
layout(std430, binding = 3) buffer CellCount { uint cell_count[]; };
layout(std430, binding = 4) writeonly buffer AgentRank { uint agent_rank[]; };

void main() {
    uint i = global_index();
    if (i >= swarm.agent_count) return;
    agent_rank[i] = atomicAdd(cell_count[grid_index(grid_cell(agents[i].position.xyz))], 1u);
}
