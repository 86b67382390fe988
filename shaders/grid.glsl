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
