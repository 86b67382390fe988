// boids.glsl: seed 000's CSSimulate arithmetic, shared by the brute-force and the grid kernels.
// Neighbour gathering differs between them; everything else (the 1/d^2 separation, Limit, the
// 1e-5 nudges, the containment push, the integration) is here, once.
#include "common.glsl"

uniform uint u_count;
uniform float u_dt;                 // already clamped to 1/30 by the caller, as the seed does
uniform float u_neighbor_radius;
uniform float u_separation_radius;
uniform float u_separation_weight;
uniform float u_alignment_weight;
uniform float u_cohesion_weight;
uniform float u_seek_weight;
uniform float u_max_speed;          // after the audio boost
uniform float u_max_force;
uniform vec3 u_target;              // the lure
uniform vec3 u_center;
uniform float u_contain_radius;
uniform float u_spawn_radius;
uniform uint u_rules;               // RULE_* bits
uniform bool u_wrap;                // seed 002's box: leave one side, come back on the other
uniform bool u_flat;                // seed 002's 2D swarm: z fixed at 0
uniform int u_obstacle_count;
uniform vec4 u_obstacles[8];        // xyz centre, w radius (seed exercise 2)
uniform float u_obstacle_weight;
uniform uint u_step;                // step number, seeds the guard's respawn

#define RULE_SEPARATION 1u
#define RULE_ALIGNMENT 2u
#define RULE_COHESION 4u
#define RULE_SEEK 8u
#define RULE_CONTAINMENT 16u

layout(std430, binding = 5) buffer SwarmStats {
    uint guarded;  // agents put back by the non-finite guard, since the counter was cleared
};

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

bool rule(uint bit) {
    return (u_rules & bit) != 0u;
}

// Spawn position and velocity for agent `id`, used by the guard to put an agent back.
Agent respawn(uint id) {
    uint h = hash_u32(id * 0x9e3779b9u ^ hash_u32(u_step));
    float u = hash_unit(h);
    float cos_theta = 2.0 * hash_unit(h + 1u) - 1.0;
    float phi = 6.2831853 * hash_unit(h + 2u);
    float sin_theta = sqrt(max(0.0, 1.0 - cos_theta * cos_theta));
    vec3 dir = vec3(sin_theta * cos(phi), sin_theta * sin(phi), cos_theta);
    if (u_flat) dir = vec3(cos(phi), sin(phi), 0.0);
    Agent a;
    a.position = vec4(u_center + dir * u_spawn_radius * pow(u, u_flat ? 0.5 : 1.0 / 3.0), float(id));
    a.velocity = vec4(dir.yzx * u_max_speed * 0.5, 0.0);
    if (u_flat) a.velocity.xyz = vec3(-dir.y, dir.x, 0.0) * u_max_speed * 0.5;
    return a;
}

// Steering and integration of one agent from its gathered neighbours (seed CSSimulate).
Agent steer_and_integrate(Agent self, Gather g) {
    vec3 position = self.position.xyz;
    vec3 velocity = self.velocity.xyz;
    vec3 steer = vec3(0.0);
    if (g.neighbors > 0u) {
        float inv = 1.0 / float(g.neighbors);
        vec3 desired_ali = normalize(g.ali * inv + 1e-5) * u_max_speed;
        vec3 desired_coh = normalize(g.coh * inv - position + 1e-5) * u_max_speed;
        if (rule(RULE_ALIGNMENT))
            steer += limit_length(desired_ali - velocity, u_max_force) * u_alignment_weight;
        if (rule(RULE_COHESION))
            steer += limit_length(desired_coh - velocity, u_max_force) * u_cohesion_weight;
        if (rule(RULE_SEPARATION))
            steer += limit_length(g.sep * u_max_speed, u_max_force * 2.0) * u_separation_weight;
    }
    if (rule(RULE_SEEK)) {
        vec3 to_target = u_target - position;
        steer += limit_length(normalize(to_target + 1e-5) * u_max_speed - velocity, u_max_force)
                 * u_seek_weight;
    }
    if (rule(RULE_CONTAINMENT) && !u_wrap) {
        vec3 from_center = position - u_center;
        float over = length(from_center) - u_contain_radius;
        if (over > 0.0) steer -= normalize(from_center) * over * u_max_force;
    }
    // Obstacles: inside reach (radius + neighbor_radius), steer away from the centre, harder
    // the deeper in, up to full strength at the surface.
    for (int k = 0; k < u_obstacle_count; k++) {
        vec3 away = position - u_obstacles[k].xyz;
        float reach = u_obstacles[k].w + u_neighbor_radius;
        float dist = length(away);
        if (dist < reach) {
            float strength = min((reach - dist) / u_neighbor_radius, 1.0);
            steer += limit_length(normalize(away + 1e-5) * u_max_speed - velocity,
                                  u_max_force * 2.0) * u_obstacle_weight * strength;
        }
    }

    vec3 v = limit_length(velocity + steer * u_dt, u_max_speed);
    vec3 p = position + v * u_dt;
    if (u_flat) {
        v.z = 0.0;
        p.z = 0.0;
    }
    if (u_wrap) {
        vec3 side = vec3(2.0 * u_contain_radius);
        vec3 wrapped = p - u_center + u_contain_radius;
        wrapped -= side * floor(wrapped / side);
        p = u_center + wrapped - u_contain_radius;
        if (u_flat) p.z = 0.0;
    }

    uint id = uint(self.position.w);
    if (!all_finite(p) || !all_finite(v)) {
        atomicAdd(guarded, 1u);
        return respawn(id);
    }
    Agent o;
    o.position = vec4(p, self.position.w);
    o.velocity = vec4(v, 0.0);
    return o;
}
