// grid.glsl: the uniform grid. Cells are neighbor_radius wide (or wider when the grid would
// have too many cells), numbered row-major with x fastest, so the three cells of a row along x
// are contiguous in cell order. Positions outside the grid fall into its border cells: clamping
// keeps every pair closer than a cell within one cell of each other, so the 27-cell search
// stays exact. The grid's shape (grid_origin, grid_inv_cell, grid_dims) is in SwarmParams.
#include "swarm_params.glsl"

ivec3 grid_cell(vec3 p) {
    if (!all_finite(p)) return ivec3(0);
    vec3 c = floor((p - swarm.grid_origin) * swarm.grid_inv_cell);
    // Clamp in float first: casting a huge float to int is undefined.
    c = clamp(c, vec3(0.0), vec3(swarm.grid_dims - 1));
    return ivec3(c);
}

uint grid_index(ivec3 c) {
    return uint(c.x + swarm.grid_dims.x * (c.y + swarm.grid_dims.y * c.z));
}

#ifdef GRID_STARTS
// Where each cell begins in cell order. scan.comp leaves each block of SCAN_BLOCK cells its
// own exclusive prefix (cell_start) and the blocks' scanned totals (block_start, ending with the
// grand total), so a start is their sum; a block where nothing was counted is skipped by the
// scan (its cell_start is stale) and every cell of it begins where the block does. This saves
// a grid-wide pass adding the block starts back, and reading and writing the empty space.
layout(std430, binding = 2) readonly buffer CellStart { uint cell_start[]; };
layout(std430, binding = 6) readonly buffer BlockStart { uint block_start[]; };

uint cell_begin(uint cell) {
    uint block = cell / uint(SCAN_BLOCK);
    uint start = block_start[block];
    return block_start[block + 1u] == start ? start : start + cell_start[cell];
}
#endif

#ifdef GRID_COUNTS
// Counting an agent into its cell: the cell's count (its rank there, from the atomic) and the
// flag of the cell's scan block, so that scan.comp skips the blocks nobody was counted in.
layout(std430, binding = 3) buffer CellCount { uint cell_count[]; };
layout(std430, binding = 9) buffer BlockUsed { uint block_used[]; };

uint count_into(uint cell, uint agents) {
    block_used[cell / uint(SCAN_BLOCK)] = 1u;  // the same value from every writer: no atomic
    return atomicAdd(cell_count[cell], agents);
}
#endif
