// gl41_guard.vert: the guard's count without atomics: one point an agent the last simulate
// pass put back, onto the single texel of a float target that adds them up (blending ONE,
// ONE); every other agent's point is clipped away.
in float in_guard;

void main() {
    gl_Position = in_guard > 0.5 ? vec4(0.0, 0.0, 0.0, 1.0) : vec4(2.0, 2.0, 2.0, 1.0);
    gl_PointSize = 1.0;
}
