"""The HDR post chain: bloom, feedback and tone maps from the renderer's linear image to the
display (compute passes, or GL 4.1's fragment passes), and the tone maps in numpy."""
