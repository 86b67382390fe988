"""MIDI in: the ports (python-rtmidi, hot-plug), the systems that open them, the mapping from
knobs to parameters with pickup and learn, and the mapping files."""
