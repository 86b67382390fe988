// gl41_guard.frag: one more agent put back.
out vec4 f_count;

void main() {
    f_count = vec4(1.0, 0.0, 0.0, 0.0);
}
