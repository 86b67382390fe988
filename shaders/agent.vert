// agent.vert: one agent's mesh, placed and oriented from the agent buffer (vertex pulling of the
// agent data: nothing per agent comes in as a vertex attribute). Drawn by the two indirect
// commands cull.comp fills: the near one's vertices are the shape's mesh (cone, dart, or a quad
// for streaks and glows), the far one's a single point a agent (POINTS, GL_POINTS, its size on
// screen the agent's). gl_InstanceID indexes the visible list of that command. Everything else
// comes from the FrameParams block (frame.*); SPEED_RAMP is a #define from visual/render/renderer.py,
// and BILLBOARD (0 or 1) picks the variant: lit meshes (cone, arrow: one flat colour out) or
// quads turned to the camera (streak, glow: the place on the quad too). Programs, not branches:
// every value a vertex hands on costs the H200's modest raster front end at a million agents,
// and a far triangle's three vertices were what held 4M agents' frames over 8 ms.
// (Not common.glsl: its global_index() uses compute-only built-ins.)
#include "agent.glsl"
#include "frame_params.glsl"
#include "agent_color.glsl"

#ifdef GL41
// GL 4.1 (visual/render/renderer41.py): the agents from the state textures, the visible list's entry
// as a per-instance attribute.
#include "gl41_state.glsl"
uniform sampler2D agent_positions;
uniform sampler2D agent_velocities;
in uint in_index;
#else
layout(std430, binding = 0) readonly buffer Agents { Agent agents[]; };
layout(std430, binding = 1) readonly buffer Visible { uint visible[]; };
#endif

in vec3 in_position;  // mesh vertex in agent space: x forward, y side, z up; |p| <= 1
in vec3 in_normal;    // its face normal (flat shading)

flat out vec3 v_color;
#if BILLBOARD && !POINTS
out vec2 v_uv;        // the place on a streak's or glow's quad, -1..1
#endif

void main() {
#ifdef GL41
    Agent agent = fetch_agent(agent_positions, agent_velocities, int(in_index));
#else
#if POINTS
    uint index = visible[frame.far_base + uint(gl_InstanceID)];
#else
    uint index = visible[gl_InstanceID];
#endif
    Agent agent = agents[index];
#endif
    vec3 p = agent.position.xyz;
    vec3 v = agent.velocity.xyz;
    float speed = length(v);
    float ratio = speed / max(frame.max_speed, 1e-6);
    float size = frame.agent_size * (1.0 + frame.size_by_speed * min(ratio, 1.5));

    vec3 forward = speed > 1e-6 ? v / speed : vec3(1.0, 0.0, 0.0);
    vec3 to_camera = normalize(frame.eye - p);
    vec3 world;
    vec3 normal = vec3(0.0);
#if POINTS
    {
        // Far: a point the agent's size on screen (at least a pixel), lit as a face turned to
        // the camera.
        world = p;
        normal = to_camera;
    }
#elif BILLBOARD
    {
        // A quad facing the camera: a glow is round; a streak lies along the velocity as seen
        // on screen, longer the faster, its head at the agent.
        vec3 across = cross(forward, to_camera);
        if (dot(across, across) < 1e-6 || frame.shape_index == 3)
            across = cross(vec3(0.0, 1.0, 0.0), to_camera);
        if (dot(across, across) < 1e-6) across = cross(vec3(1.0, 0.0, 0.0), to_camera);
        across = normalize(across);
        vec3 along = cross(to_camera, across);
        vec2 q = in_position.xy;
        if (frame.shape_index == 3) {
            world = p + (along * q.x + across * q.y) * size * 0.7;
        } else {
            float half_length = 0.5 * size * (1.0 + 2.0 * min(ratio, 1.5));  // <= STREAK_LENGTH
            if (dot(forward, along) < 0.0) along = -along;
            world = p + along * (q.x - 1.0) * half_length + across * q.y * size * 0.12;
        }
        v_uv = q;
    }
#else
    {
        // A roll that follows world up (stable as the camera moves).
        vec3 side = cross(forward, vec3(0.0, 1.0, 0.0));
        if (dot(side, side) < 1e-8) side = cross(forward, vec3(0.0, 0.0, 1.0));
        side = normalize(side);
        vec3 up = cross(side, forward);
        mat3 basis = mat3(forward, side, up);
        world = p + basis * in_position * size;
        normal = basis * in_normal;
    }
#endif
    gl_Position = frame.view_projection * vec4(world, 1.0);
#if POINTS
    gl_PointSize = clamp(frame.point_scale * size / max(gl_Position.w, 1e-6), 1.0, 64.0);
#endif

    v_color = agent_color(agent, normal);
}
