# SPDX-License-Identifier: GPL-3.0-or-later
"""Photo analysis for the Ray batch engine: one loaded backend per actor, photos in batches.

The Ray engine (sapiens_blender/batch/ray_engine.py) makes this class a Ray Data actor
pool stage: each actor creates and loads its backend once (on its GPU when Ray gave it one) and
is then called with batches of photo files read by Ray Data. Each photo's maps leave as exactly
the output tensors the v2 server would send for it (``maps_to_tensors``), packed as an
uncompressed .npz, so the builders receive what a client of the server receives. A photo that
fails carries its error instead; the others go on.
"""

from __future__ import annotations

import io
import time

import numpy as np


class PhotoAnalyzer:
    def __init__(self, model: str, backend_modules: tuple[str, ...] = ()):
        from . import base
        from ..backends import catalog

        self.model = model
        self.problem = None
        started = time.perf_counter()
        try:
            catalog.register_builtin()
            catalog.import_extra(list(backend_modules))
            self.backend = base.create(model)
            self.backend.load()
        except KeyError:
            self.problem = f"unknown model {model!r}; known: {', '.join(base.registered_names())}"
        except Exception as exc:  # reported for every photo instead of ending the batch
            self.problem = f"model {model!r} could not load: {type(exc).__name__}: {exc}"
        self.load_seconds = time.perf_counter() - started

    def __call__(self, batch: dict) -> dict:
        from .base import AnalyzeOptions
        from ..processing.image_io import decode_image

        paths = [str(p) for p in batch["path"]]
        results: list = [None] * len(paths)
        images, where = [], []
        for i, data in enumerate(batch["bytes"]):
            if self.problem:
                results[i] = RuntimeError(self.problem)
                continue
            try:
                images.append(decode_image(bytes(data)))
                where.append(i)
            except Exception as exc:
                results[i] = exc
        started = time.perf_counter()
        if images:
            # The server's defaults: the local engine sends no analysis parameters either.
            options = [AnalyzeOptions() for _ in images]
            for i, maps in zip(where, self.backend.analyze_batch(images, options)):
                results[i] = maps
        per_photo = (time.perf_counter() - started) / max(1, len(images))
        packed, errors = [], []
        for result in results:
            if not isinstance(result, Exception):
                try:
                    packed.append(_pack(result, self.model))
                    errors.append("")
                    continue
                except Exception as exc:
                    result = exc
            packed.append(b"")
            errors.append(f"{type(result).__name__}: {result}")
        return {"path": np.asarray(paths, dtype=object), "maps": np.asarray(packed, dtype=object),
                "error": np.asarray(errors, dtype=object),
                "analysis_s": np.full(len(paths), per_photo, dtype=np.float64)}


def _pack(maps: dict, model: str) -> bytes:
    """The v2 output tensors of one photo as .npz bytes (text as unicode arrays: no pickles)."""
    from .infer import maps_to_tensors

    arrays = {}
    for name, t in maps_to_tensors(maps, model).items():
        array = t.array
        if array.dtype == object:
            array = np.asarray([v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                                for v in array.reshape(-1)], dtype=np.str_).reshape(array.shape)
        arrays[name] = array
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()
