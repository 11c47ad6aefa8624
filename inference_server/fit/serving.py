# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit as v2 models (docs/body_format.md).

- ``body_fit``: inputs are the maps tensors of docs/maps_format.md (so maps from our server,
  Sapiens-lite files or ground truth can be fitted); outputs the per-person arrays.
- ``body_template``: no real input (send any small tensor, e.g. ``version`` BYTES [1]); outputs
  the constant body data, which the client caches per ``body_version``.

Importing this module is cheap: torch and anny load when the model loads.
"""

from __future__ import annotations

import numpy as np

from ..dataplane import base
from ..dataplane.base import BackendError, CancelToken, ProgressFn, no_progress
from ..protocol import contract
from .settings import FitServerSettings

# The maps tensors the fit reads (protocol/contract.json): name -> (datatype, shape, required)
FIT_INPUTS = {k: (v["datatype"], v["shape"], v["fit"] == "required") for k, v in contract.MAPS.items() if v["fit"]}
MAX_PEOPLE = 16
# Part names as docs/maps_format.md allows them (the add-on's core/maps checks the same).
MAX_PART_NAMES, MAX_PART_NAME = 256, 64
# body_motion: one track of a clip (docs/body_format.md, "A body through a clip"); smoothing is
# "causal" (default), "centred" (whole clip) or "none"
MOTION_INPUTS = {k: (v["datatype"], v["shape"], not v["optional"]) for k, v in contract.MOTION.items()}


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _people(raw, mask: np.ndarray) -> list[int]:
    """The mask ids to fit: the parameter ``people`` (a list of ids, or "1,3"), else everyone in
    the mask. A malformed or repeated id is a 400."""
    # uint8 ids: a count per value, not a sort of the whole grid
    present = [int(i) for i in np.flatnonzero(np.bincount(mask.reshape(-1), minlength=256)) if i]
    if raw is None:
        ids = present
    else:
        items = raw.split(",") if isinstance(raw, str) else raw
        ids = [_person_id(p) for p in items] if isinstance(items, list) else None
        if ids is None or None in ids:
            raise BackendError(f"parameter 'people' must be mask ids 1-255 as a list or \"1,3\", "
                               f"got {repr(raw)[:60]}", 400)
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise BackendError(f"parameter 'people' names person {twice} more than once", 400)
        missing = sorted(set(ids) - set(present))
        if missing:
            raise BackendError(f"no person {missing} in the mask; people present: {present}", 400)
    if not ids:
        raise BackendError("the mask holds no person: nothing to fit", 400)
    if len(ids) > MAX_PEOPLE:
        raise BackendError(f"{len(ids)} people: more than the {MAX_PEOPLE} one request fits", 400)
    return ids


def _person_id(item) -> int | None:
    if isinstance(item, str) and item.strip().isdigit():
        item = int(item.strip())
    if isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= 255:
        return item
    return None


def fit_device(wish: str = "auto") -> str:
    """The torch device of the body fit: ``wish`` is auto | cpu | cuda | cuda:N; auto is the GPU
    when torch sees one, else the CPU.

    With its steps captured as CUDA graphs the fit takes 0.50 s per person on an H200 (0.32 s
    with the evaluation compiled), against 1.2 s on a 2-core CPU and 2.3 s for plain L-BFGS on
    that box's CPU; eager it was launch-bound and slower than the CPU (docs/performance.md)."""
    wish = (wish or "auto").strip().lower()
    if wish == "cpu":
        return "cpu"
    import torch

    if wish == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not (wish == "cuda" or wish.startswith("cuda:")):
        raise BackendError(f"the body fit runs on cpu or cuda[:N], not {wish!r}")
    if not torch.cuda.is_available():
        raise BackendError(f"the body fit was asked to run on {wish} but torch sees no CUDA GPU")
    return wish


class _BodyModelBackend(base.TensorModel):
    """Holds the process-wide BodyModel. The template and the per-frame motion run on the CPU
    (small, latency-bound problems); the fit where ``fit_device`` says."""

    platform = "sapiens_blender_body"
    on_fit_device = False

    def __init__(self, settings: FitServerSettings | None = None) -> None:
        self._body = None
        self._settings = settings or FitServerSettings()

    def load(self, progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> None:
        if self._body is not None:
            return
        try:
            import torch

            from .body_model import BodyModel
        except ImportError as exc:
            raise BackendError(f"the body fit needs torch and anny in the server's environment "
                               f"(pip install '.[fit]'): {exc}") from None
        torch.set_grad_enabled(True)
        device = "cpu"
        if self.on_fit_device:
            device = fit_device(self._settings.device)
        self._body = BodyModel.load(device, progress=progress)

    def unload(self) -> None:
        self._body = None

    @property
    def loaded(self) -> bool:
        return self._body is not None

    inputs_spec: dict = {}

    def describe(self) -> dict:
        return {"body_version": self._body.version if self._body else None,
                "device": str(self._body.device) if self._body else None,
                "inputs": {k: {"datatype": d, "shape": s, "required": r}
                           for k, (d, s, r) in self.inputs_spec.items()}}


class BodyTemplateBackend(_BodyModelBackend):
    name = "body_template"

    def infer_tensors(self, inputs: dict, parameters: dict, progress: ProgressFn = no_progress,
                      cancel: CancelToken | None = None) -> dict[str, np.ndarray]:
        return self._body.template()


class BodyFitBackend(_BodyModelBackend):
    name = "body_fit"
    inputs_spec = FIT_INPUTS
    grid_inputs = tuple(k for k, v in contract.MAPS.items() if v["fit"] and v["shape"][:2] == [-1, -1])
    on_fit_device = True

    def infer_tensors(self, inputs: dict, parameters: dict, progress: ProgressFn = no_progress,
                      cancel: CancelToken | None = None) -> dict[str, np.ndarray]:
        from .observations import ObservationError, observe
        from .group import CompileFailed
        from .solver import fit_people

        maps = self._check(inputs)
        ids = _people(parameters.get("people"), maps["mask"])
        observations, skipped = [], {}
        for n, pid in enumerate(ids):
            if cancel is not None:  # a grid at the pixel cap: seconds per person
                cancel.check()
            progress("observe", n / len(ids), f"reading person {pid} ({n + 1} of {len(ids)})")
            try:
                observations.append(observe(
                    pid, mask=maps["mask"], parts=maps["parts"], part_names_in=maps["part_names"],
                    intrinsics=maps["intrinsics"], keypoints=maps["keypoints"], depth=maps.get("depth"),
                    pointmap=maps.get("pointmap"), metric=maps.get("metric", True),
                    keypoints_3d=maps.get("keypoints_3d"), cancel=cancel))
            except ObservationError as exc:
                skipped[pid] = str(exc)
        if not observations:
            raise BackendError("no person could be fitted: " + "; ".join(skipped.values()), 422)
        try:
            out = fit_people(self._body, observations, self.fit_settings(), progress=progress, cancel=cancel)
        except (CompileFailed, FloatingPointError) as exc:
            raise BackendError(str(exc), 500) from exc
        if skipped:
            out["skipped"] = np.array([f"person {k}: {v}" for k, v in skipped.items()])
        return out

    def fit_settings(self):
        """The solver's settings: defaults but for ``--fit-compile``."""
        from .solver import FitSettings

        return FitSettings(compile=self._settings.compile)

    @staticmethod
    def _check(inputs: dict) -> dict:
        missing = [k for k, (_d, _s, req) in FIT_INPUTS.items() if req and k not in inputs]
        if missing:
            raise BackendError(f"body_fit needs the maps tensors {missing} (docs/maps_format.md)", 400)
        out = {}
        for k, v in inputs.items():
            if k not in FIT_INPUTS:
                continue
            arr = np.asarray(v)
            # the contract checked once, here: datatype, shape and finiteness, a 400 naming the tensor
            why = contract.problem(k, arr, contract.MAPS[k])
            if why:
                raise BackendError(f"input {why} (docs/maps_format.md)", 400)
            if k == "part_names":
                out[k] = [_text(x) for x in arr.reshape(-1)]
                if len(out[k]) > MAX_PART_NAMES or any(not n or len(n) > MAX_PART_NAME for n in out[k]):
                    raise BackendError(f"part_names: at most {MAX_PART_NAMES} names of 1 to {MAX_PART_NAME} "
                                       f"characters each (docs/maps_format.md)", 400)
                continue
            if k == "metric":
                out[k] = bool(arr.reshape(-1)[0])
                continue
            out[k] = arr
        h, w = out["mask"].shape
        for k in ("parts", "depth", "pointmap", "normal", "image"):
            if k in out and out[k].shape[:2] != (h, w):
                raise BackendError(f"input {k!r} is {list(out[k].shape[:2])} pixels but mask is {[h, w]}", 400)
        if int(out["parts"].max(initial=0)) >= len(out["part_names"]):
            raise BackendError("parts holds class ids beyond part_names", 400)
        return out


class BodyMotionBackend(_BodyModelBackend):
    """One track of a clip: the fitted body posed on every frame's joints, shape held."""

    name = "body_motion"
    inputs_spec = MOTION_INPUTS

    def infer_tensors(self, inputs: dict, parameters: dict, progress: ProgressFn = no_progress,
                      cancel: CancelToken | None = None) -> dict[str, np.ndarray]:
        from .motion import MAX_FRAMES, MotionSettings, drive_body, rotvecs_from_bone_matrices

        missing = [k for k, (_d, _s, req) in MOTION_INPUTS.items() if req and k not in inputs]
        if missing:
            raise BackendError(f"body_motion needs {missing} (docs/body_format.md)", 400)
        arr = {k: np.asarray(inputs[k]) for k in MOTION_INPUTS if k in inputs}
        for k, a in arr.items():  # the contract checked once, here: a 400 naming the tensor
            why = contract.problem(k, a, contract.MOTION[k])
            if why:
                raise BackendError(f"input {why} (docs/body_format.md)", 400)
        names = [_text(x) for x in arr["target_names"].reshape(-1)]
        targets, weights = arr["targets"].astype(np.float64), arr["weights"].astype(np.float64)
        n_bones = len(self._body.bone_names)
        problems = []
        if any(not 0 < len(n) <= MAX_PART_NAME for n in names):
            problems.append(f"target_names must be 1 to {MAX_PART_NAME} characters each")
        if arr["reference_bone_matrices"].shape != (n_bones, 4, 4):
            problems.append(f"reference_bone_matrices must be [{n_bones},4,4], got {list(arr['reference_bone_matrices'].shape)}")
        if targets.shape[1] != len(names):
            problems.append(f"targets must be [T,{len(names)},3] (one column per target name), got {list(targets.shape)}")
        elif weights.shape != targets.shape[:2]:
            problems.append(f"weights must be {list(targets.shape[:2])}, got {list(weights.shape)}")
        elif not 0 < len(targets) <= MAX_FRAMES:
            problems.append(f"a track must have 1..{MAX_FRAMES} frames, got {len(targets)}")
        if problems:
            raise BackendError("; ".join(problems), 400)
        ref = int(arr["reference_frame"][0])
        if ref >= len(targets):
            raise BackendError(f"reference_frame {ref} is outside the track's {len(targets)} frames", 400)
        if not np.isfinite(targets[ref]).any():
            raise BackendError(f"the reference frame {ref} has no finite target", 422)
        smoothing = _text(arr["smoothing"][0]) if "smoothing" in arr else "causal"
        if smoothing not in ("causal", "centred", "none"):
            raise BackendError(f"smoothing must be 'causal', 'centred' or 'none', got {smoothing[:40]!r}", 400)
        rot = rotvecs_from_bone_matrices(self._body, arr["phenotypes"], arr["reference_bone_matrices"])
        res = drive_body(self._body, arr["phenotypes"], rot, arr["reference_placement"], targets, names,
                         np.nan_to_num(weights, nan=0.0), ref, MotionSettings(smoothing=smoothing),
                         cancel=cancel, progress=progress)
        f32 = lambda x: np.ascontiguousarray(x, np.float32)  # noqa: E731
        report = {"seconds": round(res.seconds, 3), "frames": len(targets), "smoothing": smoothing,
                  "residual_mm_mean": round(1000 * float(res.residual_m.mean()), 2),
                  "residual_mm_max": round(1000 * float(res.residual_m.max()), 2)}
        return {"body_version": np.array(self._body.version), "rotvecs": f32(res.rotvecs),
                "placement": f32(res.placement), "bone_matrices": f32(res.bone_matrices),
                "joints": f32(res.joints), "residual_m": f32(res.residual_m),
                "report": np.array(contract.report_json(report))}


def register_all(fit_settings: FitServerSettings | None = None) -> None:
    """The fit models, with the server's fit settings (None: from the environment)."""
    from .scan_serving import BodyScanBackend

    settings = fit_settings or FitServerSettings.from_env()
    for cls in (BodyFitBackend, BodyMotionBackend, BodyTemplateBackend, BodyScanBackend):
        base.register(cls.name, lambda cls=cls: cls(settings))
