// gl41_words.frag: the draw state as cull.comp leaves it (16 uints, visual/render/counts.py), one
// fragment a word of a 16x1 R32UI target that visual/render/renderer41.py copies into the draw state
// buffer on the GPU (a pixel pack): the two indirect commands (the template's words, with the
// instance counts the counts pass added up), the agents near the lure, and the fixed-point
// sums cull.comp makes (here from float sums: rounded once, not per agent).
//     struct DrawArraysIndirectCommand { uint count, instanceCount, first, baseInstance, pad; };
//     draw[0..4] near (the mesh), draw[5..9] far (a point), near_lure, spread, offset[3], pad
#include "frame_params.glsl"

uniform sampler2D cull_counts;    // near, far, near the lure, spread: COUNT_LANES partial sums
uniform sampler2D cull_offsets;   // offsets from frame.center: as many
uniform usampler2D draw_template; // the commands with no instances (16 words)

out uint f_word;

void main() {
    int word = int(gl_FragCoord.x);
    vec4 counts = vec4(0.0);
    vec3 offsets = vec3(0.0);
    for (int lane = 0; lane < COUNT_LANES; lane++) {  // in order: the same sums every run
        counts += texelFetch(cull_counts, ivec2(lane, 0), 0);
        offsets += texelFetch(cull_offsets, ivec2(lane, 0), 0).xyz;
    }
    uint value = texelFetch(draw_template, ivec2(word, 0), 0).x;
    float agents = float(frame.agent_count);
    if (word == 1) value = uint(counts.x + 0.5);
    else if (word == 6) value = uint(counts.y + 0.5);
    else if (word == 10) value = uint(counts.z + 0.5);
    else if (word == 11) value = uint(counts.w + 0.5);
    else if (word >= 12 && word <= 14)
        value = uint(max((offsets[word - 12] + agents * frame.reach) * frame.offset_scale, 0.0)
                     + 0.5);
    f_word = value;
}
