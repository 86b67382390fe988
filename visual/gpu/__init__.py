"""The GL layer every GPU owner stands on: contexts and the backend choice, shader files,
programs (compiled, checked, built and swapped in sets), fences, timers, uniform blocks and
what the machine holds. Knows nothing of swarms or pictures."""
