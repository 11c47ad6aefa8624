# SPDX-License-Identifier: GPL-3.0-or-later
"""The job logic behind the add-on's timer/modal path: queue, progress, cancel, error hand-off.

The bpy module never fires timers, so this exercises the same `Job.pump()` the timer calls.
"""

import threading

import pytest

from sapiens_blender.core.jobs.background import CANCELLED, DONE, FAILED, RUNNING, Job, JobCancelled


def test_progress_then_result_handed_to_the_main_thread():
    main = threading.get_ident()
    step = threading.Event()
    seen = {}

    def work(progress):
        seen["worker"] = threading.get_ident()
        progress.update("loading", 0.25, "loading model")
        step.wait(5)
        progress.update("inferring", 2.0)  # clamped
        return 42

    def on_success(result):
        seen["callback"] = threading.get_ident()
        seen["result"] = result

    job = Job("t", work, on_success=on_success).start()
    assert job.state == RUNNING
    for _ in range(500):  # the first event lands without the main thread waiting on the work
        job.pump()
        if job.stage == "loading":
            break
        threading.Event().wait(0.01)
    assert (job.stage, job.fraction, job.message) == ("loading", 0.25, "loading model")
    assert "result" not in seen  # nothing finishes until the worker does
    step.set()
    assert job.wait(5)
    assert job.state == DONE and job.result == 42
    assert seen["callback"] == main != seen["worker"]
    assert job.pump() is True  # further pumps are harmless and call nothing twice


def test_cancel_stops_work_and_runs_hooks_and_on_cancel():
    started = threading.Event()
    hooks, calls = [], []

    def work(progress):
        started.set()
        while True:
            progress.check()
            progress.cancel_event.wait(0.01)

    job = Job("c", work, on_cancel=lambda: calls.append("cancel"), cancel_hooks=(lambda: hooks.append(1),))
    job.start()
    assert started.wait(5)
    job.cancel()
    assert hooks == [1]
    assert job.wait(5)
    assert job.state == CANCELLED and calls == ["cancel"] and job.error is None


def test_late_cancel_hook_runs_immediately_when_already_cancelled():
    job = Job("h", lambda p: None)
    job._cancel_event.set()
    ran = []
    job.add_cancel_hook(lambda: ran.append(True))
    assert ran == [True]


def test_error_in_worker_reaches_on_failure_with_its_message():
    errors = []

    def work(progress):
        raise ValueError("the photo has no person in it")

    job = Job("e", work, on_failure=errors.append).start()
    assert job.wait(5)
    assert job.state == FAILED
    assert job.message == "the photo has no person in it"
    assert isinstance(errors[0], ValueError)


def test_error_raised_by_a_worker_after_cancel_counts_as_cancelled():
    gate = threading.Event()

    def work(progress):
        gate.wait(5)
        raise ConnectionResetError("socket closed by cancel")

    job = Job("x", work).start()
    job.cancel()
    gate.set()
    assert job.wait(5)
    assert job.state == CANCELLED


def test_main_thread_step_failure_turns_done_into_failed():
    failures = []

    def build(result):
        raise RuntimeError("mesh builder failed")

    job = Job("b", lambda p: "maps", on_success=build, on_failure=failures.append).start()
    assert job.wait(5)
    assert job.state == FAILED and job.message == "mesh builder failed"
    assert [str(e) for e in failures] == ["mesh builder failed"]


def test_run_blocking_and_double_start():
    job = Job("bg", lambda p: p.update("inferring", 0.5) or "ok").run_blocking(timeout=5)
    assert job.state == DONE and job.result == "ok"
    with pytest.raises(RuntimeError):
        job.start()


def test_check_raises_job_cancelled():
    job = Job("k", lambda p: None)
    job.cancel()
    with pytest.raises(JobCancelled):
        job.progress.check()
