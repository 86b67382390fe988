"""The song's form: its sections (intro, groove, build, drop, break, outro) found on its phrase
grid from features a beat, offline over the whole song and live as it plays."""
