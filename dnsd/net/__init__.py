"""Sockets, framing, timeouts and limits. Nothing here decides an answer."""
