"""The swarm instrument: a GPU swarm of boids that the music moves and a performer plays.

Installed, the card's folders are this package's parts: `swarm_instrument.audio` (sound in),
`.control` (parameters, looks, MIDI, OSC, web, musical time), `.visual` (the GPU swarm, the
picture, video out, windows), `.show` (where they meet, and the one loop) and `.instrument`
(the command, `swarm-instrument`). docs/architecture.md draws the tree.
"""
