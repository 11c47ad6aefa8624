# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/bench_sapiens.py stays runnable: its --tiny configuration goes through every mode
(the demo-style baseline, ours, without flip test, and the GPU-style stream: batches across
photos with decoding overlapped) in seconds on the CPU, so the GPU command in
docs/performance.md is ready when a GPU is."""

import json
import sys

import pytest
from repo_paths import REPO

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.torch]

BENCHMARKS = REPO / "benchmarks"


def test_tiny_benchmark_runs_every_mode(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_sapiens

    out = tmp_path / "bench.json"
    assert bench_sapiens.main(["--tiny", "--modes", "baseline,ours,noflip,stream", "--stream", "3",
                               "--stream-batch", "2", "--stream-overlap", "1,2", "--json-out", str(out)]) == 0
    results = {r["mode"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"baseline", "ours", "noflip", "stream", "stream x2"}
    assert all(r["images_per_s"] > 0 for r in results.values())
    assert results["baseline"]["placement"] == "cpu fp32" and "batch 2" in results["stream"]["placement"]
    # whole batches only (a compiled backbone keeps one shape): 3 photos -> 4
    assert results["stream"]["images"] == results["stream x2"]["images"] == 4
    assert results["stream x2"]["in_flight"] == 2
    printed = capsys.readouterr().out
    assert "| stream |" in printed and "| stream x2 |" in printed
    lines = [json.loads(line[len("RESULT "):]) for line in printed.splitlines() if line.startswith("RESULT ")]
    assert [r["mode"] for r in lines] == list(results) and all(r["size"] == "tiny" for r in lines)
    sys.modules.pop("bench_sapiens", None)


def test_post_processing_benchmark_compares_both_paths(tmp_path, monkeypatch, capsys):
    """benchmarks/bench_sapiens_post.py: the previous host path and the current one on the same
    outputs (it asserts that their keypoints agree), small photo, one repeat."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_sapiens_post

    out = tmp_path / "post.json"
    assert bench_sapiens_post.main(["--photo", "96x72", "--repeats", "1", "--foreground", "person",
                                    "--device", "cpu", "--json", str(out)]) == 0
    seconds = json.loads(out.read_text())["seconds"]
    assert set(seconds) == {"before", "now"}
    assert all(seconds[p][s] > 0 for p in seconds for s in bench_sapiens_post.STAGES)
    assert "| before / now |" in capsys.readouterr().out
    sys.modules.pop("bench_sapiens_post", None)
