// gl41_sort.frag: STAGES consecutive compare-and-exchange stages of a bitonic sort of (key,
// index) pairs, a fragment an entry (Batcher 1968; GPU Gems 2, ch. 46). In blocks of u_block
// entries the order runs up where i & u_block is 0, down elsewhere; this pass does the stages
// of strides u_stride, u_stride / 2, ... (STAGES of them, 1 to 3, a #define): the entries
// those strides connect to i (a group of 2^STAGES) are read, the stages run on them in
// registers, and i's own comes out, so a pass reads 2^STAGES entries where STAGES one-stage
// passes read 2 each and wrote STAGES times. After the last pass of the last block the whole
// texture is sorted. Pairs compare by key, then by index (all different): the order is total,
// the same every run. u_block and u_stride are this pass's place in the network (plain
// uniforms: a value a pass; visual/sim/swarm41.py sort_passes).
#include "gl41_state.glsl"

uniform usampler2D pairs;
uniform int u_block;
uniform int u_stride;

out uvec2 f_pair;

const int GROUP = 1 << STAGES;

bool before(uvec2 a, uvec2 b) {
    return a.x < b.x || (a.x == b.x && a.y < b.y);
}

void main() {
    int i = texel_index(ivec2(gl_FragCoord.xy));
    int low = u_stride >> (STAGES - 1);     // the pass's smallest stride
    int span = (u_stride << 1) - low;       // the bits of its strides
    int base = i & ~span;
    uvec2 v[GROUP];
    for (int k = 0; k < GROUP; k++)
        v[k] = texelFetch(pairs, state_texel(base + k * low), 0).xy;
    bool up = (i & u_block) == 0;
    for (int t = 0; t < STAGES; t++) {
        int half_group = GROUP >> (t + 1);  // stride u_stride >> t, in the group
        for (int k = 0; k < GROUP; k++) {
            if ((k & half_group) == 0) {
                uvec2 a = v[k];
                uvec2 b = v[k + half_group];
                // Selects, not a conditional swap: Mesa 22.3's llvmpipe compiled
                // `if (...) { v[k] = b; v[k + h] = a; }` into one that lost the first store.
                bool swap = up ? before(b, a) : before(a, b);
                v[k] = swap ? b : a;
                v[k + half_group] = swap ? a : b;
            }
        }
    }
    f_pair = v[(i & span) / low];
}
