// gl41_sort.frag: one compare-and-exchange stage of a bitonic sort of (key, index) pairs, a
// fragment an entry (Batcher 1968; GPU Gems 2, ch. 46). Entries i and i ^ u_stride are
// compared; in blocks of u_block entries the order runs up where i & u_block is 0, down
// elsewhere, so after the last stage of the last block the whole texture is sorted. Pairs
// compare by key, then by index (all different): the order is total, the same every run.
// u_block and u_stride are this pass's place in the network (plain uniforms: a value a pass).
#include "gl41_state.glsl"

uniform usampler2D pairs;
uniform int u_block;
uniform int u_stride;

out uvec2 f_pair;

bool before(uvec2 a, uvec2 b) {
    return a.x < b.x || (a.x == b.x && a.y < b.y);
}

void main() {
    int i = texel_index(ivec2(gl_FragCoord.xy));
    int partner = i ^ u_stride;
    uvec2 mine = texelFetch(pairs, state_texel(i), 0).xy;
    uvec2 other = texelFetch(pairs, state_texel(partner), 0).xy;
    bool up = (i & u_block) == 0;
    bool lower = i < partner;  // the lower entry keeps the smaller of the two when going up
    bool keep_smaller = up == lower;
    bool mine_first = before(mine, other);
    f_pair = (keep_smaller == mine_first) ? mine : other;
}
