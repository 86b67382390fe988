// yuv420.comp: a frame (RGBA8, as shown: sRGB-encoded, bottom row first as GL keeps it) to
// the planes of 4:2:0 video, top row first, BT.709 limited range as HD video is and as swscale
// makes it: Y' = 0.2126 R + 0.7152 G + 0.0722 B, Y = 16 + 219 Y', Cb = 128 + 224 (B - Y') / 1.8556,
// Cr = 128 + 224 (R - Y') / 1.5748, chroma from the mean of each 2x2 block. One invocation
// makes a block of 8 x 2 pixels: two words of luma in each of its rows, a word of each chroma
// plane. Planes, one after the other in `planes` (bytes, four to a word, the first byte the
// lowest): Y (width x height), U and V (width / 2 x height / 2 each). The width is a multiple
// of 8, the height of 2 (visual/output/yuv.py checks).
layout(local_size_x = 8, local_size_y = 8) in;

layout(binding = 0) uniform sampler2D u_frame;
layout(std430, binding = 0) writeonly buffer Planes { uint planes[]; };

uint byte_of(float value) {
    return uint(clamp(floor(value + 0.5), 0.0, 255.0));
}

float luma(vec3 rgb) {
    return dot(rgb, vec3(0.2126, 0.7152, 0.0722));
}

void main() {
    ivec2 size = textureSize(u_frame, 0);
    ivec2 block = ivec2(gl_GlobalInvocationID.xy);  // 8 x 2 pixels
    if (block.x * 8 >= size.x || block.y * 2 >= size.y) return;
    vec3 sums[4] = vec3[4](vec3(0.0), vec3(0.0), vec3(0.0), vec3(0.0));
    for (int dy = 0; dy < 2; dy++) {
        int row = block.y * 2 + dy;            // top row first
        int texel_row = size.y - 1 - row;      // GL's rows are bottom first
        uint words[2] = uint[2](0u, 0u);
        for (int dx = 0; dx < 8; dx++) {
            vec3 rgb = texelFetch(u_frame, ivec2(block.x * 8 + dx, texel_row), 0).rgb;
            words[dx / 4] |= byte_of(16.0 + 219.0 * luma(rgb)) << (8u * uint(dx % 4));
            sums[dx / 2] += rgb;
        }
        uint at = (uint(row) * uint(size.x) + uint(block.x) * 8u) / 4u;
        planes[at] = words[0];
        planes[at + 1u] = words[1];
    }
    uint u_word = 0u, v_word = 0u;
    for (int k = 0; k < 4; k++) {
        vec3 rgb = sums[k] * 0.25;
        float y = luma(rgb);
        u_word |= byte_of(128.0 + 224.0 * (rgb.b - y) / 1.8556) << (8u * uint(k));
        v_word |= byte_of(128.0 + 224.0 * (rgb.r - y) / 1.5748) << (8u * uint(k));
    }
    uint luma_words = uint(size.x) * uint(size.y) / 4u;
    uint chroma_words = luma_words / 4u;
    uint at = (uint(block.y) * uint(size.x / 2) + uint(block.x) * 4u) / 4u;
    planes[luma_words + at] = u_word;
    planes[luma_words + chroma_words + at] = v_word;
}
