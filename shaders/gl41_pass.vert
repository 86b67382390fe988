// gl41_pass.vert: a full-screen triangle from gl_VertexID alone, for the GL 4.1 backend's
// fragment passes over a texture (each fragment one texel: gl_FragCoord names it).
void main() {
    vec2 corner = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
