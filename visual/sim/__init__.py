"""The simulation: seed 000's boids stepped on the GPU (compute shaders, or GL 4.1's transform
feedback), the uniform grid that finds neighbours, and the lure the swarm seeks."""
