"""The show's inputs beside audio, MIDI and OSC: the performer's keys, the control window, the
web remote, and the audio's beats as a tempo clock; each turns its gestures into actions."""
