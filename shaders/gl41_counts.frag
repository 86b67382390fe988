// gl41_counts.frag: one agent's share of the counts and sums (gl41_counts.vert).
flat in vec4 v_counts;
flat in vec4 v_offset;

layout(location = 0) out vec4 f_counts;
layout(location = 1) out vec4 f_offset;

void main() {
    f_counts = v_counts;
    f_offset = v_offset;
}
