"""The show offline: a song rendered into a music video (its plan, checked before the first
frame, and its progress line), and the contact sheet of every bundled look."""
