// grid.glsl: the uniform grid. Cells are neighbor_radius wide (or wider when the grid would
// have too many cells), numbered row-major with x fastest, so the three cells of a row along x
// are contiguous in cell order. Positions outside the grid fall into its border cells: clamping
// keeps every pair closer than a cell within one cell of each other, so the 27-cell search
// stays exact.

uniform vec3 u_grid_origin;    // the corner of cell (0, 0, 0)
uniform float u_grid_inv_cell; // 1 / cell size
uniform ivec3 u_grid_dims;     // cells along x, y, z

ivec3 grid_cell(vec3 p) {
    if (!all_finite(p)) return ivec3(0);
    vec3 c = floor((p - u_grid_origin) * u_grid_inv_cell);
    // Clamp in float first: casting a huge float to int is undefined.
    c = clamp(c, vec3(0.0), vec3(u_grid_dims - 1));
    return ivec3(c);
}

uint grid_index(ivec3 c) {
    return uint(c.x + u_grid_dims.x * (c.y + u_grid_dims.y * c.z));
}
