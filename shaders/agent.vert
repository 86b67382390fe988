// agent.vert: one agent's mesh, placed and oriented from the agent buffer (vertex pulling of the
// agent data: nothing per agent comes in as a vertex attribute). Drawn by one indirect call of
// two commands (see cull.comp): the near command's vertices are the cone, the far command's
// start at u_near_vertices and are a single triangle turned towards the camera. gl_InstanceID
// indexes the visible list of that command; gl_VertexID includes the command's `first`, which
// tells the two apart without gl_DrawID (GL 4.6).

// The agent record of common.glsl (two vec4: position with the id in w, velocity). A vertex
// shader cannot include common.glsl, whose global_index() uses compute-only built-ins.
struct Agent {
    vec4 position;
    vec4 velocity;
};

layout(std430, binding = 0) readonly buffer Agents { Agent agents[]; };
layout(std430, binding = 1) readonly buffer Visible { uint visible[]; };

in vec3 in_position;  // mesh vertex in agent space: x forward, y side, z up; |p| <= 1
in vec3 in_normal;    // its face normal (flat shading)

uniform mat4 u_view_projection;
uniform vec3 u_camera;
uniform vec3 u_light;            // unit vector towards the light
uniform float u_size;            // agent_size: the mesh's length scale
uniform int u_near_vertices;     // the cone's vertex count: the far triangle starts there
uniform uint u_far_base;         // where the far list starts in visible[]
uniform float u_inv_max_speed;
uniform vec2 u_speed_ramp;         // speed / max_speed from x (slow colour) to y (fast colour)
uniform vec3 u_slow_color;
uniform vec3 u_fast_color;
uniform vec3 u_telegraph_color;
uniform float u_telegraph;       // 0..1: how far the swarm is shifted to the telegraph colour
uniform vec3 u_background;
uniform vec2 u_fog;              // distance where the fog starts and where it is thickest

flat out vec3 v_color;

void main() {
    bool is_far = gl_VertexID >= u_near_vertices;
    uint index = visible[is_far ? u_far_base + uint(gl_InstanceID) : uint(gl_InstanceID)];
    Agent agent = agents[index];
    vec3 p = agent.position.xyz;
    vec3 v = agent.velocity.xyz;
    float speed = length(v);

    vec3 forward = speed > 1e-6 ? v / speed : vec3(1.0, 0.0, 0.0);
    vec3 to_camera = normalize(u_camera - p);
    // Near: a roll that follows world up (stable as the camera moves). Far: the triangle's
    // plane holds the camera direction, so it is never seen edge-on.
    vec3 side = cross(forward, is_far ? to_camera : vec3(0.0, 1.0, 0.0));
    if (dot(side, side) < 1e-8) side = cross(forward, vec3(0.0, 0.0, 1.0));
    side = normalize(side);
    vec3 up = cross(side, forward);
    mat3 basis = mat3(forward, side, up);

    vec3 world = p + basis * in_position * u_size;
    gl_Position = u_view_projection * vec4(world, 1.0);

    float t = smoothstep(u_speed_ramp.x, u_speed_ramp.y, speed * u_inv_max_speed);
    vec3 color = mix(u_slow_color, u_fast_color, t);
    color = mix(color, u_telegraph_color, u_telegraph * (0.4 + 0.6 * t));
    vec3 normal = basis * in_normal;
    if (is_far) normal = dot(normal, to_camera) < 0.0 ? -normal : normal;
    // Cheap light: a little ambient, a diffuse term, a touch of rim so the cones read as 3D.
    float diffuse = max(dot(normal, u_light), 0.0);
    float rim = pow(1.0 - abs(dot(normal, to_camera)), 3.0);
    vec3 lit = color * (0.42 + 0.75 * diffuse) + color * rim * 0.35;
    float distance_to_camera = length(u_camera - p);
    float fog = smoothstep(u_fog.x, u_fog.y, distance_to_camera) * 0.65;
    v_color = clamp(mix(lit, u_background, fog), 0.0, 1.0);  // what shows: what trails fade
}
