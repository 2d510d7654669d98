"""A config load pauses the cyclic collector and hands the GIL on more often (a burst of
UPDATEs more often still); both come back as they were when the last of several
overlapping loads ends. A served process keeps big blocks in mappings of their own."""

import gc
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dnsd.process_tools import LOAD_SWITCH_S, loading, switching_often

ROOT = Path(__file__).parent.parent.parent


def test_a_load_switches_threads_more_often_and_restores_the_interval() -> None:
    usual = sys.getswitchinterval()
    assert usual > LOAD_SWITCH_S
    with loading():
        assert sys.getswitchinterval() <= LOAD_SWITCH_S
        assert not gc.isenabled()
    assert sys.getswitchinterval() == usual
    assert gc.isenabled()


def test_overlapping_loads_restore_only_when_the_last_ends() -> None:
    usual = sys.getswitchinterval()
    first_in, second_done, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[float] = []

    def first() -> None:
        with loading():
            first_in.set()
            second_done.wait(5)
            seen.append(sys.getswitchinterval())  # the other load ended; this one has not
        first_out.set()

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with loading():
        pass
    second_done.set()
    first_out.wait(5)
    thread.join(5)
    assert seen == [min(usual, LOAD_SWITCH_S)]
    assert sys.getswitchinterval() == usual


def test_the_shortest_interval_asked_for_holds_until_its_holder_ends() -> None:
    usual = sys.getswitchinterval()
    with loading():
        with switching_often(LOAD_SWITCH_S / 5):  # a burst of UPDATEs during a load
            assert sys.getswitchinterval() == pytest.approx(LOAD_SWITCH_S / 5)  # µs steps
        assert sys.getswitchinterval() == pytest.approx(min(usual, LOAD_SWITCH_S))
    assert sys.getswitchinterval() == usual


HEAP_PLACEMENT = """
import ctypes, sys
from dnsd.process_tools import keep_big_blocks_apart
if sys.argv[1] == "apart":
    keep_big_blocks_apart()
big = bytearray(4 << 20)  # a big block freed: glibc would raise its threshold to 4 MiB
del big
block = bytearray(512 << 10)
at = ctypes.addressof((ctypes.c_char * 1).from_buffer(block))
for line in open("/proc/self/maps"):
    span, *rest = line.split()
    low, high = (int(x, 16) for x in span.split("-"))
    if low <= at < high:
        print("heap" if line.rstrip().endswith("[heap]") else "own mapping")
"""


@pytest.mark.parametrize(("mode", "where"), [("apart", "own mapping"), ("default", "heap")])
def test_big_blocks_get_a_mapping_of_their_own_once_kept_apart(mode: str, where: str) -> None:
    """After a big block was freed, glibc serves the next 512 KiB one from the heap unless
    keep_big_blocks_apart was called (then it has its own mapping, handed back on free)."""
    done = subprocess.run([sys.executable, "-c", HEAP_PLACEMENT, mode], capture_output=True,
                          text=True, timeout=30, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == where
