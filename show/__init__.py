"""The show: where audio, control and the picture meet. `audio/`, `visual/` and `control/`
know nothing of each other; this package wires them into one frame (show/show.py) and runs it
in one loop (show/loop.py) for the window, headless runs, offline renders and benchmarks."""
