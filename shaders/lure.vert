// lure.vert: the lure as one point sprite where the mouse holds it.
uniform mat4 u_view_projection;
uniform vec3 u_lure;
uniform float u_pixels;  // sprite size in pixels

void main() {
    gl_Position = u_view_projection * vec4(u_lure, 1.0);
    gl_PointSize = u_pixels;
}
