"""Sound files: decoded, played in real time through the same analysis as the live input, and a
recorded set's features played back."""
