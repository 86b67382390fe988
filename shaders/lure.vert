// lure.vert: the lure as one point sprite where the mouse holds it (lure_pixels across).
#include "frame_params.glsl"

void main() {
    gl_Position = frame.view_projection * vec4(frame.lure, 1.0);
    gl_PointSize = frame.lure_pixels;
}
