// order.comp: make the order inside each grid cell deterministic: by agent id.
// scatter.comp places agents in their cell at start[cell] + rank, with rank from an atomicAdd,
// so their order inside a cell changes from run to run, and with it the order in which the
// next step sums neighbours (float sums depend on order). Here each agent counts the agents of
// its cell with a smaller id (ties, only possible in a damaged buffer, broken by position) and
// moves to start[cell] + that count: the same input gives the same bits, run after run.
#include "common.glsl"
#include "grid.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) writeonly buffer Ordered { Agent ordered[]; };
layout(std430, binding = 1) readonly buffer Sorted { Agent sorted[]; };
layout(std430, binding = 2) readonly buffer CellStart { uint cell_start[]; };

void main() {
    uint i = global_index();
    if (i >= swarm.agent_count) return;
    Agent a = sorted[i];
    uint cell = grid_index(grid_cell(a.position.xyz));
    uint first = cell_start[cell];
    uint last = cell_start[cell + 1u];
    uint rank = 0u;
    for (uint j = first; j < last; j++) {
        float other = sorted[j].position.w;
        if (other < a.position.w || (other == a.position.w && j < i)) rank++;
    }
    ordered[first + rank] = a;
}
