"""Sockets, framing, timeouts and limits. Nothing here decides an answer."""

UDP_LOOPS = ("thread", "asyncio")  # the first is the default: measured faster (bench/README.md)
