// gl41_cull.glsl: cull.comp's tests, for the GL 4.1 backend's cull (visual/render/renderer41.py): is an
// agent inside the frustum (a sphere of agent_size x cull_scale), and far (a point) or near (its
// mesh). The visible lists and the counts of them come from the same vertex shader
// (gl41_cull.vert), so they always agree.
#include "frame_params.glsl"

bool cull_inside(vec3 p) {
    float radius = frame.agent_size * frame.cull_scale;  // meshes lie within it
    bool inside = true;
    for (int k = 0; k < 6; k++)
        inside = inside && dot(frame.planes[k].xyz, p) + frame.planes[k].w >= -radius;
    return inside;
}

bool cull_far(vec3 p) {
    vec3 to_camera = p - frame.eye;
    return dot(to_camera, to_camera) > frame.lod_distance * frame.lod_distance;
}
