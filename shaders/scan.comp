// scan.comp: exclusive prefix sum in blocks of LOCAL_SIZE * ITEMS values.
// Pass "block" (u_add == false): each workgroup scans its block of data_in into data_out and
// writes the block's total to block_sums; with u_clear_input it also zeroes what it read (the
// cell counts, ready for the next step, saving a clear). Pass "add" (u_add == true): adds the
// scanned block sums back to every value of each block. The caller recurses over the block sums.
#include "common.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) buffer DataIn { uint data_in[]; };
layout(std430, binding = 1) buffer DataOut { uint data_out[]; };
layout(std430, binding = 2) buffer BlockSums { uint block_sums[]; };

uniform uint u_n;
uniform bool u_add;
uniform bool u_clear_input;

shared uint partial[LOCAL_SIZE];

const uint BLOCK = uint(LOCAL_SIZE * ITEMS);

void main() {
    uint block = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint t = gl_LocalInvocationIndex;
    uint base = block * BLOCK + t * uint(ITEMS);
    if (u_add) {
        uint offset = block_sums[block];
        for (uint k = 0u; k < uint(ITEMS); k++)
            if (base + k < u_n) data_out[base + k] += offset;
        return;
    }
    uint values[ITEMS];
    uint sum = 0u;
    for (uint k = 0u; k < uint(ITEMS); k++) {
        uint v = base + k < u_n ? data_in[base + k] : 0u;
        values[k] = v;
        sum += v;
    }
    if (u_clear_input)
        for (uint k = 0u; k < uint(ITEMS); k++)
            if (base + k < u_n) data_in[base + k] = 0u;
    // Inclusive Hillis-Steele scan of the per-invocation sums.
    partial[t] = sum;
    barrier();
    for (uint step = 1u; step < uint(LOCAL_SIZE); step <<= 1) {
        uint add = t >= step ? partial[t - step] : 0u;
        barrier();
        partial[t] += add;
        barrier();
    }
    uint running = partial[t] - sum;  // exclusive
    for (uint k = 0u; k < uint(ITEMS); k++) {
        if (base + k < u_n) data_out[base + k] = running;
        running += values[k];
    }
    if (t == uint(LOCAL_SIZE) - 1u) block_sums[block] = partial[t];
}
