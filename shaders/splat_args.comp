// splat_args.comp: one invocation sizes splat.comp's and splat_resolve.comp's dispatches from
// the far count cull.comp wrote (draw[6]), so they run over the far list only, and not at all
// when it is empty: args[0..2] splat.comp's groups (folded into y past the x limit, as
// dispatch_1d folds them), args[3..5] splat_resolve.comp's 16x16 tiles of the frame, or none.
#include "frame_params.glsl"

layout(local_size_x = 1) in;

layout(std430, binding = 2) readonly buffer DrawState { uint draw[10]; };
layout(std430, binding = 4) writeonly buffer Args { uint args[6]; };

void main() {
    uint far = draw[6];
    uint groups = (far + uint(SPLAT_LOCAL_SIZE) - 1u) / uint(SPLAT_LOCAL_SIZE);
    uint x = min(groups, 65535u);
    args[0] = x;
    args[1] = x == 0u ? 0u : (groups + x - 1u) / x;
    args[2] = 1u;
    uvec2 size = uvec2(frame.viewport);
    bool resolve = far > 0u;
    args[3] = resolve ? (size.x + 15u) / 16u : 0u;
    args[4] = resolve ? (size.y + 15u) / 16u : 0u;
    args[5] = 1u;
}
