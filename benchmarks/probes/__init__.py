"""What the frame and latency benchmarks measure with: every GL call timed, the window read back."""
