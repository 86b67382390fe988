// agent.glsl: the agent record, defined here once; every shader that reads agents includes it
// (the compute kernels through common.glsl, and agent.vert). visual/sim/swarm.py packs the same
// layout (pack_agents, AGENT_BYTES = 32).

// One agent is two vec4 (32 bytes). position.w holds the agent's id as a float (exact below
// 2^24) so that agents can be told apart after the grid reorders them; velocity.w is the number of
// neighbours the last step saw (what colour by density reads).
struct Agent {
    vec4 position;
    vec4 velocity;
};
