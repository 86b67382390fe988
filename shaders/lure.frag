// lure.frag: a soft ring, so the performer sees where the swarm is being pulled.
// LURE_COLOR: a #define from visual/render/renderer.py.

out vec4 f_color;

void main() {
    float r = length(gl_PointCoord * 2.0 - 1.0);
    float ring = smoothstep(0.55, 0.7, r) * (1.0 - smoothstep(0.85, 1.0, r));
    float core = 1.0 - smoothstep(0.2, 0.35, r);
    float alpha = max(ring, core * 0.9);
    if (alpha <= 0.01) discard;
    f_color = vec4(LURE_COLOR, alpha);
}
