// The control window's Dear ImGui draw lists: the vertex colour times the texture (the font
// atlas, the preview or a slot's thumbnail).
uniform sampler2D image;
in vec2 frag_uv;
in vec4 frag_color;
out vec4 out_color;

void main() {
    out_color = frag_color * texture(image, frag_uv);
}
