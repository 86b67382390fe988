"""The analysis in numpy and aubio: levels, bands and onsets, and the beat tracker fed every
sample in order."""
