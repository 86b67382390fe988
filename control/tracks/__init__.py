"""Control tracks: a live set's inputs recorded with their times, and MIDI files, played back
along a song by an offline render."""
