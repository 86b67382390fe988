"""The analysis in numpy: levels, bands and onsets, and the beat tracker fed every sample in
order."""
