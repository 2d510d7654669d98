"""A config load pauses the cyclic collector and hands the GIL on more often (a burst of
UPDATEs more often still); both come back as they were when the last of several
overlapping loads ends."""

import gc
import sys
import threading

import pytest

from dnsd.process_tools import LOAD_SWITCH_S, loading, switching_often


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
