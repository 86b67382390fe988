// agent.vert: one agent's mesh, placed and oriented from the agent buffer (vertex pulling of the
// agent data: nothing per agent comes in as a vertex attribute). Drawn by one indirect call of
// two commands (see cull.comp): the near command's vertices are the cone, the far command's
// start at NEAR_VERTICES and are a single triangle turned towards the camera. gl_InstanceID
// indexes the visible list of that command; gl_VertexID includes the command's `first`, which
// tells the two apart without gl_DrawID (GL 4.6). Everything else comes from the FrameParams
// block (frame.*); NEAR_VERTICES and SPEED_RAMP are #defines from visual/renderer.py.
// (Not common.glsl: its global_index() uses compute-only built-ins.)
#include "agent.glsl"
#include "frame_params.glsl"

layout(std430, binding = 0) readonly buffer Agents { Agent agents[]; };
layout(std430, binding = 1) readonly buffer Visible { uint visible[]; };

in vec3 in_position;  // mesh vertex in agent space: x forward, y side, z up; |p| <= 1
in vec3 in_normal;    // its face normal (flat shading)

flat out vec3 v_color;

void main() {
    bool is_far = gl_VertexID >= NEAR_VERTICES;
    uint index = visible[is_far ? frame.far_base + uint(gl_InstanceID) : uint(gl_InstanceID)];
    Agent agent = agents[index];
    vec3 p = agent.position.xyz;
    vec3 v = agent.velocity.xyz;
    float speed = length(v);

    vec3 forward = speed > 1e-6 ? v / speed : vec3(1.0, 0.0, 0.0);
    vec3 to_camera = normalize(frame.eye - p);
    // Near: a roll that follows world up (stable as the camera moves). Far: the triangle's
    // plane holds the camera direction, so it is never seen edge-on.
    vec3 side = cross(forward, is_far ? to_camera : vec3(0.0, 1.0, 0.0));
    if (dot(side, side) < 1e-8) side = cross(forward, vec3(0.0, 0.0, 1.0));
    side = normalize(side);
    vec3 up = cross(side, forward);
    mat3 basis = mat3(forward, side, up);

    vec3 world = p + basis * in_position * frame.agent_size;
    gl_Position = frame.view_projection * vec4(world, 1.0);

    float t = smoothstep(SPEED_RAMP.x, SPEED_RAMP.y, speed / max(frame.max_speed, 1e-6));
    vec3 color = mix(frame.slow_color, frame.fast_color, t);
    color = mix(color, frame.telegraph_color, frame.telegraph * (0.4 + 0.6 * t));
    vec3 normal = basis * in_normal;
    if (is_far) normal = dot(normal, to_camera) < 0.0 ? -normal : normal;
    // Cheap light: a little ambient, a diffuse term, a touch of rim so the cones read as 3D.
    float diffuse = max(dot(normal, frame.light), 0.0);
    float rim = pow(1.0 - abs(dot(normal, to_camera)), 3.0);
    vec3 lit = color * (0.42 + 0.75 * diffuse) + color * rim * 0.35;
    float distance_to_camera = length(frame.eye - p);
    float fog = smoothstep(frame.fog.x, frame.fog.y, distance_to_camera) * 0.65;
    v_color = clamp(mix(lit, frame.background, fog), 0.0, 1.0);  // what shows: what trails fade
}
