"""The optional compiled serving loop (dnsd/_fastloop.c). Everything else is in
pyproject.toml. `optional=True`: without a C compiler (or off Linux) the build skips it and
dnsd serves with the pure-Python loop."""

import sys

from setuptools import Extension, setup

extensions = []
if sys.platform.startswith("linux"):  # recvmmsg/sendmmsg
    extensions.append(
        Extension("dnsd._fastloop", ["dnsd/_fastloop.c"], optional=True, extra_compile_args=["-O2"])
    )
setup(ext_modules=extensions)
