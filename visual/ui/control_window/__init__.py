"""The control window: the performer's screen beside the projector's, on Dear ImGui."""
