"""The live input: PortAudio in a worker process, its ring buffer, the devices, and the input
that comes back on its own after a fault."""
