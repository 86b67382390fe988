// gl41_cells.frag: a cell table entry as gl41_cells.vert made it.
flat in vec4 v_entry;

out vec4 f_entry;

void main() {
    f_entry = v_entry;
}
