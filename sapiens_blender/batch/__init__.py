# SPDX-License-Identifier: GPL-3.0-or-later
"""Batch engines: where the jobs of `sapiens-blender batch` run.

``local`` (the default) hands jobs to builder processes on this machine (cli/batch.py);
``ray`` runs them on a Ray cluster (ray_engine.py). Both plan with plan.py and build each job
with build_job.py, so they write the same outputs for the same inputs.

From Python::

    from sapiens_blender.batch import run_batch
    run_batch("photos/", "assets/", engine="ray", formats="glb,blend", stride=2)
"""

from __future__ import annotations

import os

ENGINES = ("local", "ray")


def run_batch(input_dir: str | os.PathLike, out: str | os.PathLike, *, engine: str = "local",
              address: str | None = None, formats: str = "glb", jobs: int | None = None,
              model: str | None = None, force: bool = False, backend_modules: tuple[str, ...] = (),
              batch_size: int | None = None, **build_options) -> int:
    """The `batch` command from Python; returns its exit status (0: all built, 1: some failed).
    ``build_options`` are its other flags by name: geometry (``stride=2``, ``closed=True``,
    ``people="1,2"``, ``no_armature=True``, ...) and cluster ones (``local_cpus=8``); see
    `batch --help`. True adds a switch, None/False leave it out."""
    from ..cli import build_parser

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: use {', '.join(ENGINES)}")
    argv = ["batch", os.fspath(input_dir), "--out", os.fspath(out), "--engine", engine, "--format", formats]
    for flag, value in (("--address", address), ("--jobs", jobs), ("--model", model),
                        ("--batch-size", batch_size)):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--force"] if force else []
    for module in backend_modules:
        argv += ["--backend-module", module]
    for key, value in build_options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value not in (None, False):
            argv += [flag, str(value)]
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)
