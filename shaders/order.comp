// order.comp: write each agent to its place in cell order, deterministically. Inside a cell the
// agents keep the order they had in the unsorted buffer (a stable counting sort): an agent's
// place is its cell's start plus the number of agents of its cell that scatter.comp listed with
// a smaller index. The unsorted buffer is the last step's sorted one, in the same order, so the
// same input gives the same order, and the same bits, run after run; after a load or a resize
// (bin.comp) it is in id order, and so is every cell.
#define GRID_STARTS
#include "common.glsl"
#include "grid.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) writeonly buffer Sorted { Agent sorted[]; };
layout(std430, binding = 1) readonly buffer Unsorted { Agent unsorted[]; };
layout(std430, binding = 4) readonly buffer AgentCell { uvec2 agent_cell[]; };  // cell, rank
layout(std430, binding = 7) readonly buffer SlotAgent { uint slot_agent[]; };

void main() {
    uint i = global_index();
    if (i >= swarm.agent_count) return;
    uint cell = agent_cell[i].x;
    uint first = cell_begin(cell);
    uint last = cell_begin(cell + 1u);
    uint rank = 0u;
    for (uint j = first; j < last; j++) rank += slot_agent[j] < i ? 1u : 0u;
    sorted[first + rank] = unsorted[i];
}
