"""The web remote: a page served to any browser and its WebSocket, behind a token."""
