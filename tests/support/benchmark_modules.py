# SPDX-License-Identifier: GPL-3.0-or-later
"""A script of benchmarks/ imported as a module for its tests (the benchmarks are scripts, not a
package)."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager

from repo_paths import REPO

BENCHMARKS = REPO / "benchmarks"


@contextmanager
def benchmark_module(name: str):
    """benchmarks/<name>.py as a module of its own name, registered in sys.modules while in use
    (dataclasses look their module up there), with benchmarks/ on the path for the scripts that
    import their neighbours (as they do when run from there)."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
        sys.path.remove(str(BENCHMARKS))
