# SPDX-License-Identifier: GPL-3.0-or-later
"""Stopping a clip's body stage stops the server's posing (issue 37): Ctrl-C in the call, and a
drive whose poses were deferred to a background thread (what `animate` does), each against the
real server, whose job must end within a second or two, not after every frame."""

import os
import signal
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from server_harness import start_server

from sapiens_blender.core.errors import RequestCancelled
from sapiens_blender.core.motion.body_drive import drive_bodies, server_body_driver, stop_bodies
from sapiens_blender.core.remote import analysis
from sapiens_blender.core.remote.client import V2Client

pytestmark = [pytest.mark.torch, pytest.mark.anny]

FRAMES = 600  # ~30 s of posing on this machine: a stop must not wait for them


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("drive-cancel"), "--parent-pid", str(os.getpid()))
    with V2Client(f"http://{srv.url}", srv.token) as c:
        c.load_model("body_motion")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def track(body):
    """A body's reference pose and a long track of its joints swaying (each frame a new solve)."""
    import torch

    from inference_server.fit.correspondences import JOINT_NAMES

    phenotypes = np.full(6, 0.5)
    placement = np.eye(4)
    placement[2, 3] = 3.0
    with torch.no_grad():
        out = body.evaluate(np.zeros((1, len(body.bone_names), 3)), phenotypes[None], placement[None])
    names = list(JOINT_NAMES[:23])
    sway = 0.05 * np.sin(np.linspace(0, 20, FRAMES))[:, None, None] * np.array([1.0, 0.0, 0.0])
    targets = out["joints"][0, :23][None] + sway * np.linspace(0, 1, 23)[None, :, None]
    return SimpleNamespace(phenotypes=phenotypes, bones=out["bone_matrices"][0], placement=placement,
                           names=names, targets=targets, joints=out["joints"][0])


def _the_job_ends(server, since: float, limit: float = 10.0) -> tuple[str, float]:
    """(state, seconds after ``since``) of the server's one body_motion job once it has ended."""
    while True:
        jobs = [j for j in server.get("/v2/jobs").json()["jobs"]
                if j["model"] == "body_motion" and j["kind"] == "infer"]
        if jobs and all(j["state"] in ("done", "failed", "cancelled") for j in jobs):
            return jobs[-1]["state"], time.monotonic() - since
        assert time.monotonic() - since < limit, f"the server still poses after {limit} s: {jobs}"
        time.sleep(0.05)


def _forget_jobs(server):
    """Wait out any earlier job so the next measurement sees only its own."""
    for j in server.get("/v2/jobs").json()["jobs"]:
        assert j["state"] in ("done", "failed", "cancelled"), j


def test_ctrl_c_in_the_body_motion_call_cancels_the_servers_job(server, track):
    assert threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    timer = threading.Timer(2.0, lambda: signal.pthread_kill(main, signal.SIGINT))
    client = V2Client(f"http://{server.url}", server.token)  # stays open: the stop is no hang-up
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            analysis.body_motion(client, phenotypes=track.phenotypes, reference_bone_matrices=track.bones,
                                 reference_placement=track.placement, reference_frame=0, targets=track.targets,
                                 target_names=track.names, weights=np.ones(track.targets.shape[:2]))
        interrupted = time.monotonic()
        state, took = _the_job_ends(server, interrupted)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        client.close()
    assert state == "cancelled" and took < 2.0, (state, took)


def test_a_deferred_drive_stops_the_servers_posing(server, track):
    _forget_jobs(server)
    fit = SimpleNamespace(bone_matrices=track.bones[None], placement=track.placement[None],
                          phenotypes=track.phenotypes[None], joints=track.joints[None], index=lambda pid: 0)
    t = SimpleNamespace(id=1, frames=np.arange(FRAMES), joints=track.targets,
                        estimated=np.zeros(track.targets.shape[:2], bool), reference_maps=object(),
                        reference_person=1, reference_frame=0, body=None)
    animation = SimpleNamespace(tracks=[t], joint_names=track.names, notes=[], source="")
    with V2Client(f"http://{server.url}", server.token) as client:
        _fit_reference, pose_track = server_body_driver(client)
        drive_bodies(animation, lambda maps, people: ("template", fit), pose_track, defer=True)
        time.sleep(2.0)  # the server is posing in the drive's background thread
        assert not t.body.motion.done()
        stopped = time.monotonic()
        stop_bodies(animation)  # what `animate` does on Ctrl-C or a failed build
        state, took = _the_job_ends(server, stopped)
        with pytest.raises(RequestCancelled):
            t.body.motion.result(timeout=5)
    assert state == "cancelled" and took < 2.0, (state, took)
