// scan.comp: exclusive prefix sum in blocks of BLOCK = LOCAL_SIZE * ITEMS values.
// Pass "block" (u_add == false): each workgroup scans its block of data_in into data_out and
// writes the block's total to block_sums; with u_clear_input (the grid's cell counts) it also
// zeroes what it read, ready for the next step, and skips a block whose block_used flag is 0:
// nothing was counted there (most of a grid is empty space), so the block only reports a total
// of 0 and its starts are left unwritten (shaders/grid.glsl reads an empty block's start from
// the block starts alone). It also writes a 0 after the last block total, so that the scanned
// totals end with the grand total. Pass "add" (u_add == true): adds the scanned block sums back
// to every value of each block. The caller recurses over the block sums.
// Global memory is read and written coalesced (consecutive invocations, consecutive values);
// the scan itself runs in shared memory.
#include "common.glsl"

layout(local_size_x = LOCAL_SIZE) in;

layout(std430, binding = 0) buffer DataIn { uint data_in[]; };
layout(std430, binding = 1) buffer DataOut { uint data_out[]; };
layout(std430, binding = 2) buffer BlockSums { uint block_sums[]; };
layout(std430, binding = 3) buffer BlockUsed { uint block_used[]; };  // cells: 1 if counted

uniform uint u_n;
uniform bool u_add;
uniform bool u_clear_input;

const uint BLOCK = uint(LOCAL_SIZE * ITEMS);

// One padding word every 32 values: an invocation's ITEMS consecutive values sit in different
// banks from its neighbours'.
uint padded(uint k) { return k + k / 32u; }

shared uint values[BLOCK + BLOCK / 32u];
shared uint partial[LOCAL_SIZE];

void main() {
    uint block = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint t = gl_LocalInvocationIndex;
    uint first = block * BLOCK;
    if (u_add) {
        uint offset = block_sums[block];
        for (uint k = 0u; k < uint(ITEMS); k++) {
            uint i = first + k * uint(LOCAL_SIZE) + t;
            if (i < u_n) data_out[i] += offset;
        }
        return;
    }
    if (block == 0u && t == 0u) block_sums[(u_n + BLOCK - 1u) / BLOCK] = 0u;
    if (u_clear_input) {
        bool used = block_used[block] != 0u;
        barrier();  // every invocation has read the flag before it is cleared
        if (!used) {
            if (t == 0u) block_sums[block] = 0u;
            return;
        }
        if (t == 0u) block_used[block] = 0u;
    }
    for (uint k = 0u; k < uint(ITEMS); k++) {
        uint local_i = k * uint(LOCAL_SIZE) + t;
        uint i = first + local_i;
        values[padded(local_i)] = i < u_n ? data_in[i] : 0u;
        if (u_clear_input && i < u_n) data_in[i] = 0u;
    }
    barrier();
    // Each invocation sums its ITEMS consecutive values...
    uint sum = 0u;
    for (uint k = 0u; k < uint(ITEMS); k++) sum += values[padded(t * uint(ITEMS) + k)];
    // ...the sums are scanned across the workgroup (Hillis-Steele, inclusive)...
    partial[t] = sum;
    barrier();
    for (uint step = 1u; step < uint(LOCAL_SIZE); step <<= 1) {
        uint add = t >= step ? partial[t - step] : 0u;
        barrier();
        partial[t] += add;
        barrier();
    }
    // ...and each invocation writes its values' exclusive prefixes back.
    uint running = partial[t] - sum;
    for (uint k = 0u; k < uint(ITEMS); k++) {
        uint v = values[padded(t * uint(ITEMS) + k)];
        values[padded(t * uint(ITEMS) + k)] = running;
        running += v;
    }
    if (t == uint(LOCAL_SIZE) - 1u) block_sums[block] = partial[t];
    barrier();
    for (uint k = 0u; k < uint(ITEMS); k++) {
        uint local_i = k * uint(LOCAL_SIZE) + t;
        uint i = first + local_i;
        if (i < u_n) data_out[i] = values[padded(local_i)];
    }
}
