// gl41_scatter.frag: the agent gl41_scatter.vert placed.
flat in vec4 v_position;
flat in vec4 v_velocity;

layout(location = 0) out vec4 f_position;
layout(location = 1) out vec4 f_velocity;

void main() {
    f_position = v_position;
    f_velocity = v_velocity;
}
