// gl41_simulate.vert: seed 000's CSSimulate as a transform feedback pass (GL 4.1: no compute).
// One vertex an agent (gl_VertexID, no vertex buffer); the rasteriser is off and the three
// outputs are captured, each into its own buffer, which visual/sim/swarm41.py copies back into the
// state textures on the GPU. The arithmetic is boids.glsl's, the compute kernels' own.
//
// BRUTE: all pairs, the seed's loop over every agent (texelFetch instead of a groupshared
// tile: the texture cache plays the tile's part). GRID: the agents are in cell order (sorted
// by gl41_sort.frag, gathered by gl41_gather.frag) and the cell table holds each cell's
// [first, last) in that order, stamped with the step that wrote it (a cell with another
// stamp is empty this step: the table is never cleared), so each (y, z) row of the 3x3x3
// block around an agent is one contiguous range, as in simulate_grid.comp.
#include "boids.glsl"
#include "gl41_state.glsl"
#if GRID
#include "grid.glsl"
#endif

uniform sampler2D agent_positions;
uniform sampler2D agent_velocities;
#if GRID
uniform sampler2D cell_table;  // CELL_WIDTH wide: (first, last, stamp) a cell
#endif

out vec4 o_position;
out vec4 o_velocity;
out float o_guard;  // 1: the guard put this agent back (visual/sim/swarm41.py counts them)

#if GRID
const ivec2 ROWS[9] = ivec2[9](ivec2(0, 0), ivec2(-1, 0), ivec2(1, 0), ivec2(0, -1),
                               ivec2(0, 1), ivec2(-1, -1), ivec2(1, -1), ivec2(-1, 1),
                               ivec2(1, 1));

float step_stamp() {
    return float(swarm.step_index & 0xffffffu);  // exact in a float
}

// [first, last) of the cells first_cell .. first_cell + cells - 1 (contiguous in cell order):
// the smallest first and the largest last of those stamped this step.
ivec2 cells_range(uint first_cell, int cells) {
    int first = 0x7fffffff;
    int last = 0;
    float stamp = step_stamp();
    for (int k = 0; k < cells; k++) {
        int c = int(first_cell) + k;
        vec4 entry = texelFetch(cell_table, ivec2(c % CELL_WIDTH, c / CELL_WIDTH), 0);
        if (entry.z == stamp) {
            first = min(first, int(entry.x));
            last = max(last, int(entry.y));
        }
    }
    return first < last ? ivec2(first, last) : ivec2(0);
}

// simulate_grid.comp's row_range: row `row` of the block around cell c, cut to the budget.
ivec2 row_range(ivec3 c, int row, inout uint budget) {
    ivec3 lo = max(c - 1, ivec3(0));
    ivec3 hi = min(c + 1, swarm.grid_dims - 1);
    ivec2 yz = c.yz + ROWS[row];
    if (budget == 0u || any(lessThan(yz, lo.yz)) || any(greaterThan(yz, hi.yz)))
        return ivec2(0);
    ivec2 range = cells_range(grid_index(ivec3(lo.x, yz)), hi.x - lo.x + 1);
    uint taken = min(uint(range.y - range.x), budget);
    budget -= taken;
    return ivec2(range.x, range.x + int(taken));
}
#endif

void main() {
    int i = gl_VertexID;
    Agent self = fetch_agent(agent_positions, agent_velocities, i);
    float r2 = swarm.neighbor_radius * swarm.neighbor_radius;
    float s2 = swarm.separation_radius * swarm.separation_radius;
    Gather g = gather_begin();
#if GRID
    uint budget = swarm.neighbor_cap == 0u ? 0xffffffffu : swarm.neighbor_cap;
    ivec3 c = grid_cell(self.position.xyz);
    for (int row = 0; row < 9; row++) {
        ivec2 range = row_range(c, row, budget);
        for (int j = range.x; j < range.y; j++) {
            if (j == i) continue;
            ivec2 t = state_texel(j);
            vec3 other = texelFetch(agent_positions, t, 0).xyz;
            if (gather_position(g, self.position.xyz, other, r2, s2))
                g.ali += texelFetch(agent_velocities, t, 0).xyz;
        }
    }
#else
    int count = int(swarm.agent_count);
    for (int j = 0; j < count; j++) {
        if (j == i) continue;
        ivec2 t = state_texel(j);
        vec3 other = texelFetch(agent_positions, t, 0).xyz;
        if (gather_position(g, self.position.xyz, other, r2, s2))
            g.ali += texelFetch(agent_velocities, t, 0).xyz;
    }
#endif
    Agent o = steer_and_integrate(self, g);
    o_position = o.position;
    o_velocity = o.velocity;
    o_guard = guard_fired ? 1.0 : 0.0;
}
