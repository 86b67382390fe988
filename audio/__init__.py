"""Audio input and analysis: levels, bands and onsets that move the swarm.

`audio.source.open_audio` opens what the command line asks for: the live input
(`audio.input.live_input`, whose PortAudio stream runs in a worker process, `audio.input.worker`,
started by `audio.input.process`) or a sound file (`audio.files.playback`, read by
`audio.files.decode`); `audio.analysis.features` holds the pure numpy maths (modulation routes live
in `control.parameters.modulation`).
"""
