# SPDX-License-Identifier: GPL-3.0-or-later
"""Timer glue: run a core `Job` without ever blocking Blender's UI.

Interactive Blender: the job's work runs on a worker thread and a `bpy.app.timers` callback
pumps it ~10 times a second on the main thread (progress for the panel, then the
main-thread completion callback, e.g. building images from the maps).
Background mode (`blender -b`, the `bpy` module): there is no event loop and timers never
fire, so the same job runs to completion before the operator returns.
"""

from __future__ import annotations

import functools

import bpy

from ..core.jobs.background import CANCELLED, DONE, Job
from . import state

PUMP_INTERVAL = 0.1
# None: block only in background mode. Tests set False to drive the interactive path by hand
# (the bpy module never fires timers, so they pump the job themselves).
BLOCKING: bool | None = None


def launch(job: Job, kind: str, *, slot: str = "job") -> Job:
    """Run `job` as the session's `slot` ("job": the panel's; "setup_job"/"check_job": the
    preferences' environment set-up and interpreter check, which may run alongside)."""
    session = state.SESSION
    setattr(session, slot, job)
    if slot == "job":
        session.job_kind = kind
        session.clear_error()
    blocking = bpy.app.background if BLOCKING is None else BLOCKING
    if blocking:
        job.run_blocking()
        redraw_ui()
    else:
        job.start()
        # persistent: keep pumping across File > Open (load_pre cancels the job, and the pump
        # must still deliver that cancellation or the panel would stay busy forever).
        bpy.app.timers.register(functools.partial(_tick, job), first_interval=PUMP_INTERVAL,
                                persistent=True)
    return job


def _tick(job: Job):
    try:
        finished = job.pump()
    except Exception as exc:  # noqa: BLE001 - a timer must never die silently
        state.SESSION.set_error(exc)
        finished = True
    redraw_ui()
    if finished:
        report_outcome(job)
    return None if finished else PUMP_INTERVAL


def outcome(job: Job) -> tuple[str, str]:
    """(report level, message) for a finished job: what the operator would have reported."""
    session = state.SESSION
    if job.state == DONE:
        return "INFO", session.last_info or f"{job.name}: done"
    if job.state == CANCELLED:
        return "WARNING", f"{job.name} was cancelled."
    message = session.last_error if job is session.job else state.describe_error(job.error or job.message)
    return "ERROR", f"{job.name} failed: {message}"


def report_outcome(job: Job) -> None:
    """The operator returned long ago (interactive mode): report through a tiny operator so the
    outcome still reaches the status bar and the Info log, not only the panel."""
    level, message = outcome(job)
    try:
        bpy.ops.sapiens.report(level=level, message=message[:1000])
    except (RuntimeError, AttributeError):
        pass  # add-on disabled meanwhile, or an ERROR report raised in background mode


def redraw_ui() -> None:
    """Progress changed: redraw the sidebars and the preferences (no-op when headless)."""
    wm = getattr(bpy.context, "window_manager", None)
    if wm is None:
        return
    for window in wm.windows:
        for area in window.screen.areas:
            if area.type in ("VIEW_3D", "PREFERENCES"):
                area.tag_redraw()
