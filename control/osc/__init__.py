"""OSC in over UDP: the wire format parsed strictly, and the addresses turned into actions."""
