// gl41_key.frag: the grid sort's input, one texel an entry: (cell of agent k, k) for the N
// agents of the state, (0xffffffff, k) for the padding up to a power of two (sorted last).
#include "common.glsl"
#include "gl41_state.glsl"
#include "grid.glsl"

uniform sampler2D agent_positions;

out uvec2 f_pair;

void main() {
    int k = texel_index(ivec2(gl_FragCoord.xy));
    uint key = 0xffffffffu;
    if (k < int(swarm.agent_count))
        key = grid_index(grid_cell(texelFetch(agent_positions, state_texel(k), 0).xyz));
    f_pair = uvec2(key, uint(k));
}
