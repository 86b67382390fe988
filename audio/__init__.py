"""Audio input and analysis: levels, bands and onsets that move the swarm.

`audio.source.open_audio` opens what the command line asks for; `audio.analysis` holds the
pure numpy maths; `audio.modulation` routes features to parameters.
"""
