# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/bench_clip_gpu.py stays runnable (issue #36 item 3): its --tiny configuration takes
a short synthetic clip through the real analysis pipeline, the animate command's motion stage
and (where anny's cache is here) the server's body fit and motion, in seconds on the CPU, and
reports frames/s per stage and end to end. Nothing is downloaded."""

import json
import sys

import pytest
from repo_paths import REPO

pytest.importorskip("torch")
pytest.importorskip("transformers")
BENCHMARKS = REPO / "benchmarks"


def test_tiny_clip_benchmark_times_every_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the body template cache
    import bench_clip_gpu

    out = tmp_path / "clip.json"
    assert bench_clip_gpu.main(["--tiny", "--frames", "8", "--batch", "4", "--in-flight", "2", "--body", "off",
                                "--json-out", str(out)]) == 0
    report = json.loads(out.read_text())
    stages = [r["stage"] for r in report["results"]]
    assert stages[0] == "analysis" and stages[1].startswith("motion") and stages[-1].startswith("end to end")
    assert all(r["frames_per_s"] > 0 for r in report["results"])
    # the planted person is found, lifted and tracked through the clip
    assert report["frames"] == 8 and report["tracks"] >= 1
    printed = capsys.readouterr().out
    lines = [json.loads(line[len("RESULT "):]) for line in printed.splitlines() if line.startswith("RESULT ")]
    assert [r["stage"] for r in lines] == stages
    sys.modules.pop("bench_clip_gpu", None)


def test_planted_keypoints_survive_the_flip_test(monkeypatch):
    """The planted joints are mirror pairs: the flip test's mirrored pass puts them back in place."""
    import numpy as np

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_clip_gpu
    import bench_sapiens
    from inference_server.dataplane.base import AnalyzeOptions
    from inference_server.processing.goliath import KEYPOINT_NAMES

    args = bench_clip_gpu._args(["--tiny"])
    backend = bench_clip_gpu.build_backend(args, (64, 48))
    image = (np.random.default_rng(0).random((96, 72, 3)) * 255).astype(np.uint8)
    run = bench_sapiens._overlapped_runner(backend, AnalyzeOptions(max_side=96))
    kp = run([image])[0]["keypoints"][0]
    seen = kp[:, 2] > 0.5
    names = {KEYPOINT_NAMES[k] for k in np.flatnonzero(seen)}
    assert {"nose", "left_wrist", "right_wrist", "left_ankle", "right_ankle"} <= names
    assert seen.sum() < 60  # everything else unseen (the random heatmaps are scaled to ~0)
    left, right = kp[KEYPOINT_NAMES.index("left_shoulder")], kp[KEYPOINT_NAMES.index("right_shoulder")]
    assert left[0] > right[0] and abs(left[1] - right[1]) < 1.0  # facing the camera, level
