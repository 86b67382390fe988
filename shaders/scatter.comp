// scatter.comp: list each agent in its new cell, at start[cell] + rank (its atomicAdd rank), by
// its index in the unsorted buffer: slot_agent[slot] = index. The ranks come from atomics, so
// the order inside a cell changes from run to run; order.comp puts it right, reading these
// 4-byte slots instead of whole agents.
#define GRID_STARTS
#include "common.glsl"
#include "grid.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 4) readonly buffer AgentCell { uvec2 agent_cell[]; };  // cell, rank
layout(std430, binding = 7) writeonly buffer SlotAgent { uint slot_agent[]; };

void main() {
    uint i = global_index();
    if (i >= swarm.agent_count) return;
    uvec2 cell_rank = agent_cell[i];
    slot_agent[cell_begin(cell_rank.x) + cell_rank.y] = i;
}
