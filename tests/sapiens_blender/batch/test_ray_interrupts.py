# SPDX-License-Identifier: GPL-3.0-or-later
"""The Ray engine's interrupt note: a Ctrl+C that something swallows still stops the run."""

import signal
import threading

import pytest

from sapiens_blender.batch.ray_engine import Interrupts


def test_a_swallowed_ctrl_c_is_still_noted_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with Interrupts() as interrupts:
        interrupts.check()  # nothing yet
        try:  # what a library's code that catches everything does to the KeyboardInterrupt
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_sigterm_is_noted_too_and_off_the_main_thread_nothing_is_installed():
    with Interrupts() as interrupts:
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)
        assert interrupts.received.is_set()
    seen = []

    def elsewhere():
        with Interrupts() as other:
            seen.append(other._previous)
            other.check()
    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen == [{}]
