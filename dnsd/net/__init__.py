"""Sockets, framing, timeouts and limits. Nothing here decides an answer."""

UDP_LOOPS = ("thread", "asyncio")  # the first is the default: measured faster (bench/README.md)
# The UDP thread's loop: compiled (dnsd/_fastloop.c) when it was built at install, else pure.
SERVING_LOOPS = ("auto", "compiled", "pure")
