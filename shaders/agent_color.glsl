// agent_color.glsl: an agent's colour as it is drawn (agent.vert) and splatted (splat.comp):
// the palette at a place chosen by color_by, the telegraph shift, the light (lit meshes and far
// points get a cheap diffuse and rim term, billboards their own light), the glow, the crowd
// factor of added light and the fog. `normal`: the lit face's normal (a far point's faces the
// camera). Needs frame_params.glsl, and SPEED_RAMP, ADDITIVE_CROWD and BILLBOARD defined.
vec3 agent_color(Agent agent, vec3 normal) {
    vec3 p = agent.position.xyz;
    vec3 v = agent.velocity.xyz;
    float speed = length(v);
    float ratio = speed / max(frame.max_speed, 1e-6);
    vec3 forward = speed > 1e-6 ? v / speed : vec3(1.0, 0.0, 0.0);
    vec3 to_camera = normalize(frame.eye - p);
    // The colour: the palette at a place chosen by color_by.
    float distance_to_camera = length(frame.eye - p);
    float x;
    if (frame.color_by_index == 1) {         // heading: once round the compass, mirrored (no seam)
        float turn = fract(atan(forward.z, forward.x) / 6.28318530718 + 0.5);
        x = 1.0 - abs(2.0 * turn - 1.0);
    } else if (frame.color_by_index == 2) {  // depth: near 1 (the palette's bright end), far 0
        x = clamp((frame.depth_range.y - distance_to_camera)
                  / max(frame.depth_range.y - frame.depth_range.x, 1e-6), 0.0, 1.0);
    } else if (frame.color_by_index == 3) {  // density: the neighbours the last step saw
        float n = max(agent.velocity.w, 0.0);
        x = n / (n + 12.0);
    } else {                           // speed
        x = smoothstep(SPEED_RAMP.x, SPEED_RAMP.y, ratio);
    }
    float place = x * float(frame.palette_stops - 1);
    int stop = min(int(place), frame.palette_stops - 2);
    vec3 color = mix(frame.palette_colors[stop].rgb, frame.palette_colors[stop + 1].rgb,
                     place - float(stop));
    float t = smoothstep(SPEED_RAMP.x, SPEED_RAMP.y, ratio);
    color = mix(color, frame.telegraph_color, frame.telegraph * (0.4 + 0.6 * t));
#if BILLBOARD
    vec3 lit = color;  // light of its own
#else
    // Cheap light: a little ambient, a diffuse term, a touch of rim so meshes read as 3D.
    float diffuse = max(dot(normal, frame.light), 0.0);
    // (max: pow of a base below zero, a rounding away from a face turned right at the camera
    // as a far point's is, is undefined, and NaN came out white)
    float rim = pow(max(1.0 - abs(dot(normal, to_camera)), 0.0), 3.0);
    vec3 lit = color * (0.42 + 0.75 * diffuse) + color * rim * 0.35;
#endif
    lit = min(lit, vec3(1.0)) * frame.glow;  // the light of a lit face, then its glow (HDR)
    // Added light: an agent in a crowd gives less, so where hundreds overlap on screen (the
    // swarm's core) the sum stays a bright colour instead of burning to white (the crowd is
    // the neighbours the last step counted, velocity.w).
    if (frame.additive == 1) lit *= ADDITIVE_CROWD / (ADDITIVE_CROWD + max(agent.velocity.w, 0.0));
    float fog = smoothstep(frame.fog_range.x, frame.fog_range.y, distance_to_camera) * frame.fog;
    // Opaque agents fade into the background; added light fades to nothing.
    vec3 shown = frame.additive == 1 ? lit * (1.0 - fog) : mix(lit, frame.background, fog);
    return clamp(shown, 0.0, 64.0);  // HDR: what trails fade, what the bloom sees
}
