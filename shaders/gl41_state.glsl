// gl41_state.glsl: the GL 4.1 backend's agent state, read from float textures (GL 4.1 has no
// storage buffers). Agent k lives in texel (k % STATE_WIDTH, k / STATE_WIDTH) of two RGBA32F
// textures: position (xyz, w the id as a float, as agent.glsl's Agent) and velocity (xyz, w the
// neighbours the last step saw). STATE_WIDTH is a #define from visual/sim/swarm41.py (a power of
// two). The same layout serves the sort's (key, index) pairs, one texel an entry.
#include "agent.glsl"

ivec2 state_texel(int k) {
    return ivec2(k % STATE_WIDTH, k / STATE_WIDTH);
}

int texel_index(ivec2 texel) {
    return texel.y * STATE_WIDTH + texel.x;
}

Agent fetch_agent(sampler2D positions, sampler2D velocities, int k) {
    ivec2 t = state_texel(k);
    Agent a;
    a.position = texelFetch(positions, t, 0);
    a.velocity = texelFetch(velocities, t, 0);
    return a;
}
