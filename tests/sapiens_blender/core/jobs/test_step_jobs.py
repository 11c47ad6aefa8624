# SPDX-License-Identifier: GPL-3.0-or-later
"""StepJob: main-thread work in steps, one per pump, with progress, cancel and failure."""

from sapiens_blender.core.jobs.stepped import StepJob


def counting_steps(log, fail_at=None):
    try:
        for i in range(4):
            yield f"step {i}", i / 4
            if i == fail_at:
                raise ValueError("bad input")
            log.append(i)
        return "built"
    finally:
        log.append("cleanup")


def test_one_step_per_pump_then_the_result():
    log, results = [], []
    job = StepJob("build", lambda: counting_steps(log), on_success=results.append).start()
    assert not job.pump() and job.stage == "step 0" and job.fraction == 0 and log == []
    assert not job.pump() and job.stage == "step 1" and log == [0]
    assert job.wait() and job.state == "done" and results == ["built"] and log == [0, 1, 2, 3, "cleanup"]
    assert len(job.step_seconds) == 5 and job.longest_step()[1] >= 0


def test_cancel_stops_at_the_next_step_and_cleans_up():
    log, cancelled = [], []
    job = StepJob("build", lambda: counting_steps(log), on_cancel=lambda: cancelled.append(True)).start()
    job.pump()
    job.pump()
    job.cancel()
    assert job.pump() and job.state == "cancelled" and cancelled == [True]
    assert log == [0, "cleanup"]  # step 1 never ran


def test_a_failing_step_fails_the_job_with_its_error():
    errors = []
    job = StepJob("build", lambda: counting_steps([], fail_at=1), on_failure=errors.append).run_blocking()
    assert job.state == "failed" and "bad input" in job.message and isinstance(errors[0], ValueError)
