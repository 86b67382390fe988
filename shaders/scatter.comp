// scatter.comp: write each agent to its place in cell order, start[cell] + rank.
// Agents barely move between steps, so the writes are nearly coalesced.
#include "common.glsl"
#include "grid.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) writeonly buffer Sorted { Agent sorted[]; };
layout(std430, binding = 1) readonly buffer Unsorted { Agent unsorted[]; };
layout(std430, binding = 2) readonly buffer CellStart { uint cell_start[]; };
layout(std430, binding = 4) readonly buffer AgentRank { uint agent_rank[]; };

void main() {
    uint i = global_index();
    if (i >= swarm.agent_count) return;
    Agent a = unsorted[i];
    sorted[cell_start[grid_index(grid_cell(a.position.xyz))] + agent_rank[i]] = a;
}
