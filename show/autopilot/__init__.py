"""The autopilot: the show follows the song's form, choosing and moving between looks."""
