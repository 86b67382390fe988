"""Musical time: tempo and beat from whichever clock leads (tap, MIDI clock, Ableton Link, the
audio's beats)."""
