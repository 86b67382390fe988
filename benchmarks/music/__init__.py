"""Songs with known beats, and how a tracker is scored on them (the beat-accuracy bench)."""
