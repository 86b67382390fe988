// common.glsl: the agent record and helpers every swarm kernel shares (the compute kernels,
// and the GL 4.1 backend's vertex and fragment passes, compiled with GL41 defined).
#include "agent.glsl"

#ifndef GL41
// The 1D index of this invocation when a large dispatch is folded into y (see dispatch_1d).
// Every kernel defines LOCAL_SIZE (from Python) as its local_size_x.
uint global_index() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * uint(LOCAL_SIZE);
}
#endif

// True unless a component is NaN or infinite. Tests the exponent bits, which no fast-math
// optimisation can remove (isnan() may be compiled away).
bool all_finite(vec3 v) {
    uvec3 e = floatBitsToUint(v) & 0x7f800000u;
    return all(notEqual(e, uvec3(0x7f800000u)));
}

// A well-mixed 32-bit hash (lowbias32) for reproducible per-agent random numbers on the GPU.
uint hash_u32(uint x) {
    x ^= x >> 16; x *= 0x7feb352du;
    x ^= x >> 15; x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

float hash_unit(uint x) {  // [0, 1)
    return float(hash_u32(x) >> 8) * (1.0 / 16777216.0);
}
