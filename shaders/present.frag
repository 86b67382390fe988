// present.frag: copy the renderer's image onto the target (a window's default framebuffer
// too, which a blit cannot reach when its depth format differs), pixel for pixel.
layout(binding = 0) uniform sampler2D u_image;  // texture unit 0: no uniform to set

out vec4 f_color;

void main() {
    f_color = vec4(texelFetch(u_image, ivec2(gl_FragCoord.xy), 0).rgb, 1.0);
}
