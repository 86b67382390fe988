// present.frag: copy the renderer's image onto the target (a window's default framebuffer
// too, which a blit cannot reach when its depth format differs), pixel for pixel.
uniform sampler2D u_image;

out vec4 f_color;

void main() {
    f_color = vec4(texelFetch(u_image, ivec2(gl_FragCoord.xy), 0).rgb, 1.0);
}
