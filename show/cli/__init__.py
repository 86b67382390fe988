"""The command line: its options checked as they are parsed, the show's set-up from them, the
performer's console, and the live run (window or headless) from start to a clean end."""
