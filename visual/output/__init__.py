"""Frames leaving the GPU: the offline render's encoder, video outputs (streams, NDI, Syphon,
Spout, a virtual camera) fed from a ring of pixel buffers read without waiting, PNG files."""
