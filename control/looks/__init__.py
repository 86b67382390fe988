"""Looks and what keeps them: preset files and the slots, the recovery file, and the guarded
reading and atomic writing of every file a user hands the instrument."""
