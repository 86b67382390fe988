// simulate_grid.comp: steer and integrate with neighbours from the uniform grid.
// agents_in is in cell order and cell_begin(c) is where cell c begins in it, so each of the
// nine (y, z) rows of the 3x3x3 block around an agent is one contiguous range. The new state
// goes to agents_out in the same order; the new cell is counted (its rank kept) so that
// scatter.comp and order.comp can write the next step's input, sorted, after scan.comp.
//
// LANES invocations share an agent: lane k sums candidates k, k + LANES, ... of each row, and
// the lanes' partial sums are then added in lane order (a fixed order: the same input gives
// the same bits). More lanes give the GPU more independent work where an agent has hundreds
// or thousands of candidates (a settled swarm crowding the lure), fewer waste less where it
// has a hundred (a spread swarm). visual/sim/swarm.py picks LANES per step from the count and how
// crowded the swarm is: on a measured step (the MEASURE variant, a program of its own so that
// the others carry none of it) each workgroup adds up the candidates its agents visit (each
// capped at CROWD_CAP) and adds the sum / CROWD_UNIT to SwarmStats.crowd, read back a few
// steps later.
#define GRID_STARTS
#define GRID_COUNTS
#include "boids.glsl"
#include "grid.glsl"

#ifndef LANES
#define LANES 1
#endif
#ifndef MEASURE
#define MEASURE 0
#endif
#define CROWD_CAP 4095u
#define CROWD_UNIT 32u

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) readonly buffer AgentsIn { Agent agents_in[]; };
layout(std430, binding = 1) writeonly buffer AgentsOut { Agent agents_out[]; };
// Each agent's new cell and its rank there (atomicAdd), for scatter.comp and order.comp.
layout(std430, binding = 4) writeonly buffer AgentCell { uvec2 agent_cell[]; };

const ivec2 ROWS[9] = ivec2[9](ivec2(0, 0), ivec2(-1, 0), ivec2(1, 0), ivec2(0, -1),
                               ivec2(0, 1), ivec2(-1, -1), ivec2(1, -1), ivec2(-1, 1),
                               ivec2(1, 1));

#if MEASURE
shared uint s_crowd;
#endif
#if LANES > 1
shared vec4 part_sep[LOCAL_SIZE];  // w: neighbours (a float: exact below 2^24)
shared vec3 part_ali[LOCAL_SIZE];
shared vec3 part_coh[LOCAL_SIZE];
#endif

// Row `row` of the 3x3x3 block around cell c: [first, last) in agents_in, cut to what is left
// of `budget`. The agent's own row comes first, then the others: under a neighbour cap the
// nearest rows are the ones examined, evenly on every side.
uvec2 row_range(ivec3 c, int row, inout uint budget) {
    ivec3 lo = max(c - 1, ivec3(0));
    ivec3 hi = min(c + 1, swarm.grid_dims - 1);
    ivec2 yz = c.yz + ROWS[row];
    if (budget == 0u || any(lessThan(yz, lo.yz)) || any(greaterThan(yz, hi.yz)))
        return uvec2(0u);
    uint first = cell_begin(grid_index(ivec3(lo.x, yz)));
    uint last = cell_begin(grid_index(ivec3(hi.x, yz)) + 1u);
    last = first + min(last - first, budget);
    budget -= last - first;
    return uvec2(first, last);
}

// Candidates an agent examines: neighbor_cap, or all of them (0, the seed).
uint first_budget() {
    return swarm.neighbor_cap == 0u ? 0xffffffffu : swarm.neighbor_cap;
}

// This lane's share of agent i's candidates: every LANES-th of each row from `lane` on.
Gather gather_lane(Agent self, uint i, uint budget, uint lane, inout uint visited) {
    float r2 = swarm.neighbor_radius * swarm.neighbor_radius;
    float s2 = swarm.separation_radius * swarm.separation_radius;
    ivec3 c = grid_cell(self.position.xyz);
    Gather g = gather_begin();
    for (int row = 0; row < 9; row++) {
        uvec2 range = row_range(c, row, budget);
        visited += range.y - range.x;
        for (uint j = range.x + lane; j < range.y; j += uint(LANES)) {
            if (j == i) continue;
            if (gather_position(g, self.position.xyz, agents_in[j].position.xyz, r2, s2))
                g.ali += agents_in[j].velocity.xyz;
        }
    }
    return g;
}

#if LANES > 1
// Lane 0's sums plus the other lanes' (t: lane 0's invocation), in lane order.
Gather add_lanes(Gather g, uint t) {
    for (uint l = 1u; l < uint(LANES); l++) {
        g.sep += part_sep[t + l].xyz;
        g.ali += part_ali[t + l];
        g.coh += part_coh[t + l];
        g.neighbors += uint(part_sep[t + l].w);
    }
    return g;
}

void share_lane(Gather g, uint t) {
    part_sep[t] = vec4(g.sep, float(g.neighbors));
    part_ali[t] = g.ali;
    part_coh[t] = g.coh;
}
#endif

void finish(uint i, Agent self, Gather g) {
    Agent o = steer_and_integrate(self, g);
    agents_out[i] = o;
    uint cell = grid_index(grid_cell(o.position.xyz));
    agent_cell[i] = uvec2(cell, count_into(cell, 1u));
}

void main() {
    uint t = gl_LocalInvocationIndex;
    uint lane = t % uint(LANES);
    uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) *
             uint(LOCAL_SIZE / LANES) + t / uint(LANES);
    bool in_range = i < swarm.agent_count;
    Agent self;
    self.position = vec4(0.0);
    self.velocity = vec4(0.0);
    if (in_range) self = agents_in[i];
    uint budget = in_range ? first_budget() : 0u;
#if MEASURE
    if (t == 0u) s_crowd = 0u;
#endif

    uint visited = 0u;
    Gather g = gather_lane(self, i, budget, lane, visited);
#if MEASURE
    barrier();
    if (lane == 0u && in_range) atomicAdd(s_crowd, min(visited, CROWD_CAP));
    barrier();
    if (t == 0u) atomicAdd(crowd, s_crowd / CROWD_UNIT);
#endif
#if LANES > 1
    share_lane(g, t);
    barrier();
    if (lane != 0u) return;
    g = add_lanes(g, t);
#endif
    if (in_range) finish(i, self, g);
}
