"""The supervisor, its spare process and the start trace: a show that dies comes back."""
