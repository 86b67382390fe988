// gl41_cells.vert: the cell table from the sorted keys, one point an agent in cell order. FIRST:
// the first agent of each cell writes (its place, -, this step's stamp) into its cell's texel;
// otherwise (the LAST pass) the last agent of each cell writes its place + 1 (the colour masks
// keep each pass to its channels). Every other point is clipped away. The table is the
// cell_width-wide texture visual/sim/swarm41.py draws into, its viewport exactly the rows the
// grid's cells take, so a cell's texel is computed from SwarmParams.grid_dims alone.
#include "gl41_state.glsl"
#include "swarm_params.glsl"

uniform usampler2D pairs;

flat out vec4 v_entry;

void main() {
    int k = gl_VertexID;
    uint key = texelFetch(pairs, state_texel(k), 0).x;
    int n = int(swarm.agent_count);
#if FIRST
    bool edge = k == 0 || texelFetch(pairs, state_texel(k - 1), 0).x != key;
#else
    bool edge = k == n - 1 || texelFetch(pairs, state_texel(k + 1), 0).x != key;
#endif
    int cells = swarm.grid_dims.x * swarm.grid_dims.y * swarm.grid_dims.z;
    int rows = (cells + CELL_WIDTH - 1) / CELL_WIDTH;
    int c = int(key);
    vec2 texel = vec2(float(c % CELL_WIDTH), float(c / CELL_WIDTH)) + 0.5;
    vec2 ndc = texel / vec2(float(CELL_WIDTH), float(rows)) * 2.0 - 1.0;
    gl_Position = edge ? vec4(ndc, 0.0, 1.0) : vec4(2.0, 2.0, 2.0, 1.0);
    gl_PointSize = 1.0;
    v_entry = vec4(float(k), float(k + 1), float(swarm.step_index & 0xffffffu), 0.0);
}
