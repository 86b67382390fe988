"""The picture: the GPU cull into an indirect instanced draw, far agents splatted, the HDR post
chain (bloom, feedback, tone maps), the camera, meshes, palettes and what the cull counted."""
