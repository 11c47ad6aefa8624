# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/fit_sync_audit.py: what it records when a step syncs (the sync debug mode played
by the test: the CPU has none), and its whole run on the CPU (the GPU lease's dry run)."""

import json
import subprocess
import sys
import warnings

import pytest

from repo_paths import REPO

torch = pytest.importorskip("torch")


class _State:
    def __init__(self):
        self.x = torch.zeros(3)


class _Solver:
    def __init__(self):
        self.state = _State()


def test_a_syncing_step_is_reported_with_its_stack_and_its_sites():
    from benchmarks.fit_sync_audit import Audit

    audit, mode = Audit(cuda=False), {"now": 0}
    audit.mode = lambda m: mode.update(now=m)

    def step(solver):
        solver.state.x += 1.0  # written in the checks, undone before the counting run
        if mode["now"] == "error":
            raise RuntimeError("called a synchronizing CUDA operation")
        if mode["now"] == "warn":
            warnings.warn("called a synchronizing CUDA operation")
            warnings.warn("called a synchronizing CUDA operation")

    solver = _Solver()
    wrapped = audit.wrap("_step", step)
    wrapped(solver)
    assert torch.equal(solver.state.x, torch.ones(3))  # the error run's write undone
    error, warn = audit.rows
    assert "synchronizing" in error["error"] and error["stack"] == []  # no frame of ours in this fake
    assert warn["syncs"] == 2 and warn["sites"][0][1] == 2
    wrapped(solver)  # checked once: later calls run plainly
    assert len(audit.rows) == 2 and torch.equal(solver.state.x, torch.full((3,), 2.0))
    assert mode["now"] == 0


def test_a_clean_step_is_said_clean():
    from benchmarks.fit_sync_audit import Audit

    audit = Audit(cuda=False)
    audit.wrap("_refresh", lambda solver: None)(_Solver())
    assert [r.get("result", r.get("syncs")) for r in audit.rows] == ["clean", 0]


@pytest.mark.slow
@pytest.mark.anny
def test_the_audit_runs_on_the_cpu(tmp_path):
    out = tmp_path / "audit.jsonl"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_fit.py"), "--save-cases", str(tmp_path),
                    "--cases", "clean"], check=True, cwd=REPO, timeout=300)
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "fit_sync_audit.py"), "--cases-dir", str(tmp_path),
                    "--device", "cpu", "--json-out", str(out)], check=True, cwd=REPO, timeout=300)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[-1]["verdict"] == "cpu" and rows[-1]["checked"] == ["_refresh", "_step"]
    assert [r["mode"] for r in rows[:-1]] == ["error", "warn", "error", "warn"]
