// boids.glsl: seed 000's CSSimulate arithmetic, shared by the brute-force and the grid kernels.
// Neighbour gathering differs between them; everything else (the 1/d^2 separation, Limit, the
// 1e-5 nudges, the containment push, the integration) is here, once.
#include "common.glsl"
#include "swarm_params.glsl"

// Everything it reads comes from the SwarmParams block (swarm.*), generated with the RULE_* bits
// and MAX_OBSTACLES from visual/gpu/uniforms.py. swarm.speed_limit is max_speed after the audio
// boost; dt is already clamped to 1/30 by the caller, as the seed does.

#ifdef GL41
// GL 4.1 has no storage buffers: the simulate pass hands this on per agent (a varying) and
// visual/sim/swarm41.py adds the flags up on the GPU.
bool guard_fired = false;
#define COUNT_GUARDED() guard_fired = true
#else
layout(std430, binding = 5) buffer SwarmStats {
    uint guarded;  // agents put back by the non-finite guard, since the counter was cleared
    uint crowd;    // candidates the grid kernel visited, / CROWD_UNIT, on a measured step
};
#define COUNT_GUARDED() atomicAdd(guarded, 1u)
#endif

struct Gather {
    vec3 sep;
    vec3 ali;
    vec3 coh;
    uint neighbors;
};

Gather gather_begin() {
    Gather g;
    g.sep = vec3(0.0);
    g.ali = vec3(0.0);
    g.coh = vec3(0.0);
    g.neighbors = 0u;
    return g;
}

// One candidate neighbour, exactly as the seed's inner loop, but reading only its position:
// the caller adds the neighbour's velocity to g.ali when this returns true, so candidates that
// are not neighbours (most of them in the grid's 27 cells) cost 16 bytes, not 32.
bool gather_position(inout Gather g, vec3 self_position, vec3 other_position, float r2,
                     float s2) {
    vec3 d = other_position - self_position;
    float dist2 = dot(d, d);
    if (dist2 < r2) {
        g.coh += other_position;
        g.neighbors++;
        if (dist2 < s2) g.sep -= d / max(dist2, 1e-4);
        return true;
    }
    return false;
}

vec3 limit_length(vec3 v, float max_length) {
    float l = length(v);
    return l > max_length ? v * (max_length / l) : v;
}

bool flat_swarm() {
    return swarm.dimensions == 2;
}

bool rule(uint bit) {
    return (swarm.rules & bit) != 0u;
}

// Spawn position and velocity for agent `id`, used by the guard to put an agent back.
Agent respawn(uint id) {
    uint h = hash_u32(id * 0x9e3779b9u ^ hash_u32(swarm.step_index));
    float u = hash_unit(h);
    float cos_theta = 2.0 * hash_unit(h + 1u) - 1.0;
    float phi = 6.2831853 * hash_unit(h + 2u);
    float sin_theta = sqrt(max(0.0, 1.0 - cos_theta * cos_theta));
    vec3 dir = vec3(sin_theta * cos(phi), sin_theta * sin(phi), cos_theta);
    if (flat_swarm()) dir = vec3(cos(phi), sin(phi), 0.0);
    Agent a;
    vec3 offset = dir * swarm.spawn_radius * pow(u, flat_swarm() ? 0.5 : 1.0 / 3.0);
    a.position = vec4(swarm.center + offset, float(id));
    a.velocity = vec4(dir.yzx * swarm.speed_limit * 0.5, 0.0);
    if (flat_swarm()) a.velocity.xyz = vec3(-dir.y, dir.x, 0.0) * swarm.speed_limit * 0.5;
    return a;
}

// Steering and integration of one agent from its gathered neighbours (seed CSSimulate).
Agent steer_and_integrate(Agent self, Gather g) {
    vec3 position = self.position.xyz;
    vec3 velocity = self.velocity.xyz;
    vec3 steer = vec3(0.0);
    float max_speed = swarm.speed_limit;  // after the audio boost
    float max_force = swarm.max_force;
    if (g.neighbors > 0u) {
        float inv = 1.0 / float(g.neighbors);
        vec3 desired_ali = normalize(g.ali * inv + 1e-5) * max_speed;
        vec3 desired_coh = normalize(g.coh * inv - position + 1e-5) * max_speed;
        if (rule(RULE_ALIGNMENT))
            steer += limit_length(desired_ali - velocity, max_force) * swarm.alignment_weight;
        if (rule(RULE_COHESION))
            steer += limit_length(desired_coh - velocity, max_force) * swarm.cohesion_weight;
        if (rule(RULE_SEPARATION))
            steer += limit_length(g.sep * max_speed, max_force * 2.0) * swarm.separation_weight;
    }
    if (rule(RULE_SEEK)) {
        vec3 to_target = swarm.target - position;
        steer += limit_length(normalize(to_target + 1e-5) * max_speed - velocity, max_force)
                 * swarm.seek_weight;
    }
    if (rule(RULE_CONTAINMENT) && !swarm.wrap) {
        vec3 from_center = position - swarm.center;
        float over = length(from_center) - swarm.contain_radius;
        if (over > 0.0) steer -= normalize(from_center) * over * max_force;
    }
    // Obstacles: inside reach (radius + neighbor_radius), steer away from the centre, harder
    // the deeper in, up to full strength at the surface.
    for (int k = 0; k < min(swarm.obstacle_count, MAX_OBSTACLES); k++) {
        vec3 away = position - swarm.obstacles[k].xyz;
        float reach = swarm.obstacles[k].w + swarm.neighbor_radius;
        float dist = length(away);
        if (dist < reach) {
            float strength = min((reach - dist) / swarm.neighbor_radius, 1.0);
            steer += limit_length(normalize(away + 1e-5) * max_speed - velocity,
                                  max_force * 2.0) * swarm.obstacle_weight * strength;
        }
    }

    vec3 v = limit_length(velocity + steer * swarm.dt, max_speed);
    vec3 p = position + v * swarm.dt;
    if (flat_swarm()) {
        v.z = 0.0;
        p.z = 0.0;
    }
    if (swarm.wrap) {
        vec3 side = vec3(2.0 * swarm.contain_radius);
        vec3 wrapped = p - swarm.center + swarm.contain_radius;
        wrapped -= side * floor(wrapped / side);
        p = swarm.center + wrapped - swarm.contain_radius;
        if (flat_swarm()) p.z = 0.0;
    }

    uint id = uint(self.position.w);
    if (!all_finite(p) || !all_finite(v)) {
        COUNT_GUARDED();
        return respawn(id);
    }
    Agent o;
    o.position = vec4(p, self.position.w);
    o.velocity = vec4(v, float(g.neighbors));  // w: neighbours seen (the look's density)
    return o;
}
