// fade.frag: the trail. Blended with (SRC_ALPHA, ONE_MINUS_SRC_ALPHA) over last frame's image,
// alpha = 1 - trail pulls every pixel that fraction of the way to the background:
//     new = background * (1 - trail) + previous * trail
#include "frame_params.glsl"

out vec4 f_color;

void main() {
    f_color = vec4(frame.background, 1.0 - frame.trail);
}
