// resize.comp: change the number of agents on the GPU, without a CPU round trip or a stall.
// Agents keep their ids: an agent whose id is below the new count moves to slot id (so ids stay
// 0..count-1, unique); new ids from the old count up are spawned as the guard respawns agents.
// The result is in id order; the grid re-sorts it on the next step.
#include "boids.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) writeonly buffer Resized { Agent resized[]; };
layout(std430, binding = 1) readonly buffer Old { Agent old[]; };

uniform uint u_old_count;
uniform uint u_new_count;

void main() {
    uint i = global_index();
    if (i < u_old_count) {
        Agent a = old[i];
        uint id = uint(a.position.w);
        if (id < u_new_count) resized[id] = a;
    } else if (i < u_new_count) {
        resized[i] = respawn(i);
    }
}
