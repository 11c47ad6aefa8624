# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/bench_sapiens_stages.py on the CPU with tiny models: every stage of every task
timed, the three head precisions, the profile (the GPU lease's dry run)."""

import json
import subprocess
import sys

import pytest

from repo_paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.torch]
pytest.importorskip("transformers")


def test_every_stage_is_timed_for_each_head_precision(tmp_path):
    out = tmp_path / "stages.jsonl"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_sapiens_stages.py"), "--size", "tiny",
                    "--input", "64x48", "--device", "cpu", "--batch", "2", "--repeats", "1", "--profile",
                    "--json-out", str(out)], check=True, cwd=REPO, timeout=300)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["stages_setup", "stages", "stages_profile", "stages", "stages"]
    timed = [r for r in rows if r["kind"] == "stages"]
    assert [r["heads"] for r in timed] == ["fp32", "bf16", "mixed"]
    for r in timed:
        assert len(r["ms_per_image"]) == 12 and all(v >= 0 for v in r["ms_per_image"].values())
        assert r["total_ms"] > 0 and r["backbone_ms"] + r["head_ms"] + r["post_ms"] == pytest.approx(r["total_ms"], abs=0.05)
    assert rows[2]["top"] and rows[2]["top"][0][1] > 0
