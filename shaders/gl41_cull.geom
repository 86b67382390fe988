// gl41_cull.geom: the stream compaction of the cull: a point in, the same point out where the
// vertex shader kept it, nothing otherwise; transform feedback captures o_index of each.
layout(points) in;
layout(points, max_vertices = 1) out;

flat in int v_keep[];
flat in uint v_index[];

flat out uint o_index;

void main() {
    if (v_keep[0] != 0) {
        o_index = v_index[0];
        gl_Position = vec4(0.0, 0.0, 0.0, 1.0);
        EmitVertex();
        EndPrimitive();
    }
}
