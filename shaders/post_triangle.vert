// post_triangle.vert: a full-screen triangle from gl_VertexID alone (no vertex buffer), with
// v_uv running 0..1 across the viewport (pixel centres at (i + 0.5) / size).
out vec2 v_uv;

void main() {
    vec2 corner = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    v_uv = corner;
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
