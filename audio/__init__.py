"""Audio input and analysis: levels, bands and onsets that move the swarm.

`audio.source.open_audio` opens what the command line asks for: the live input (`audio.live`,
whose PortAudio stream runs in a worker process, `audio.worker`, started by `audio.process`)
or a sound file (`audio.playback`, read by `audio.decode`); `audio.analysis` holds the pure
numpy maths (modulation routes live in `control.parameters.modulation`).
"""
