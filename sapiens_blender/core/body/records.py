# SPDX-License-Identifier: GPL-3.0-or-later
"""The fitted body as plain numpy data (docs/body_format.md): the template and fit records, and
bodies inside a maps ``.npz``.

The fit runs on the server (torch + anny); everything the Blender side needs arrives as numpy
arrays: a ``BodyTemplate`` (constant per body-model version, cached in the user's cache folder)
and a ``BodyFit`` (per person of one photo). Both round-trip through a maps ``.npz`` under the
``body_`` / ``fit_`` key prefixes. numpy + stdlib only: this runs inside Blender's Python.
The template cache is ``cache.py``, the pose and skinning arithmetic ``pose.py``, the server
calls ``core/remote/body_calls.py``.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, fields

import numpy as np

from ..errors import SapiensError

TEMPLATE_PREFIX, FIT_PREFIX = "body_", "fit_"


class BodyError(SapiensError, ValueError):
    """The body data is malformed or does not match its template; the message says which."""


# --- helpers ---------------------------------------------------------------------------------
def _str_array(value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind == "S":
        arr = np.char.decode(arr, "utf-8")
    return arr.astype(np.str_)


def scalar_str(value) -> str:
    arr = _str_array(value)
    return str(arr.reshape(-1)[0]) if arr.size else ""


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise BodyError(what)


def _prefixed(name: str, prefix: str) -> str:
    """``body_`` + name, except names that already start with the prefix (``body_version``)."""
    return name if name.startswith(prefix) else prefix + name


class _ArrayRecord:
    """A dataclass of arrays stored under (prefixed) keys: in a maps .npz, on the wire."""

    def to_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:  # an optional field left out (no expressions)
                continue
            out[_prefixed(f.name, prefix)] = (np.asarray(value, np.str_) if isinstance(value, (str, tuple))
                                              else np.asarray(value))
        return out


def _fields_from(cls, arrays, prefix: str, what: str) -> dict:
    """The record's fields from ``arrays``; a field with a default (added since: the
    expressions) may be absent (older files and servers)."""
    keys = {f.name: _prefixed(f.name, prefix) for f in fields(cls)}
    optional = {f.name for f in fields(cls) if f.default is not MISSING}
    missing = [k for n, k in keys.items() if k not in arrays and n not in optional]
    if missing:
        raise BodyError(f"{what} is missing: {', '.join(missing)}")
    return {name: arrays[key] for name, key in keys.items() if key in arrays}


# --- the template ----------------------------------------------------------------------------
@dataclass
class BodyTemplate(_ArrayRecord):
    """Constant body data of one body-model version (faces, UVs, rig, weights, parts)."""

    body_version: str
    faces: np.ndarray  # int32 [F,3]
    uv: np.ndarray  # float32 [T,2]
    face_uv: np.ndarray  # int32 [F,3]
    bone_names: tuple[str, ...]
    bone_parents: np.ndarray  # int32 [B], -1 for roots, parents before children
    weight_bones: np.ndarray  # int32 [V,K]
    weight_values: np.ndarray  # float32 [V,K]
    vertex_parts: np.ndarray  # uint8 [V]
    part_names: tuple[str, ...]
    phenotype_names: tuple[str, ...]
    joint_names: tuple[str, ...]
    # The 52 ARKit expressions as rest-pose offsets of the vertices they move (core/body/expressions.py);
    # none in a template from before them.
    expression_names: tuple[str, ...] = ()
    expression_vertices: np.ndarray | None = None  # int32 [N]
    expression_deltas: np.ndarray | None = None  # float32 [E,N,3], model frame, metres at weight 1
    face_landmark_names: tuple[str, ...] = ()  # Goliath face keypoints the expression fit reads
    face_landmark_vertices: np.ndarray | None = None  # int32 [L]: the vertex of each

    @property
    def num_vertices(self) -> int:
        return int(self.weight_bones.shape[0])

    @property
    def num_bones(self) -> int:
        return len(self.bone_names)

    def validate(self) -> "BodyTemplate":
        self.body_version = scalar_str(self.body_version)
        _check(bool(self.body_version), "body template: body_version is empty")
        self.faces = np.asarray(self.faces)
        _check(self.faces.ndim == 2 and self.faces.shape[1] == 3 and self.faces.dtype.kind in "iu",
               f"body template: faces must be int [F,3], got {self.faces.dtype} {self.faces.shape}")
        self.faces = self.faces.astype(np.int32)
        self.weight_bones = np.asarray(self.weight_bones)
        self.weight_values = np.asarray(self.weight_values, np.float32)
        _check(self.weight_bones.ndim == 2 and self.weight_bones.shape == self.weight_values.shape,
               f"body template: weight_bones {self.weight_bones.shape} and weight_values "
               f"{self.weight_values.shape} must both be [V,K]")
        self.weight_bones = self.weight_bones.astype(np.int32)
        n_verts = self.num_vertices
        _check(n_verts > 0 and self.faces.size > 0, "body template: no vertices or no faces")
        _check(int(self.faces.min()) >= 0 and int(self.faces.max()) < n_verts,
               f"body template: faces index vertices outside 0..{n_verts - 1}")
        self.uv = np.asarray(self.uv, np.float32)
        self.face_uv = np.asarray(self.face_uv).astype(np.int32)
        _check(self.uv.ndim == 2 and self.uv.shape[1] == 2, f"body template: uv must be [T,2], got {self.uv.shape}")
        _check(self.face_uv.shape == self.faces.shape,
               f"body template: face_uv {self.face_uv.shape} must match faces {self.faces.shape}")
        _check(int(self.face_uv.min()) >= 0 and int(self.face_uv.max()) < len(self.uv),
               "body template: face_uv indexes outside uv")
        self.bone_names = tuple(str(n) for n in _str_array(self.bone_names).reshape(-1))
        self.bone_parents = np.asarray(self.bone_parents).astype(np.int32).reshape(-1)
        n_bones = len(self.bone_names)
        _check(len(self.bone_parents) == n_bones,
               f"body template: {n_bones} bone names but {len(self.bone_parents)} parents")
        _check(len(set(self.bone_names)) == n_bones, "body template: bone names are not unique")
        _check(bool(np.all(self.bone_parents < np.arange(n_bones))),
               "body template: every bone's parent must come before it (-1 for a root)")
        _check(int(self.weight_bones.min()) >= 0 and int(self.weight_bones.max()) < n_bones,
               "body template: weight_bones index bones outside the rig")
        sums = self.weight_values.sum(axis=1)
        _check(bool(np.all(self.weight_values >= 0)) and bool(np.allclose(sums, 1.0, atol=1e-3)),
               "body template: weights must be non-negative and sum to 1 per vertex")
        self.part_names = tuple(str(n) for n in _str_array(self.part_names).reshape(-1))
        self.vertex_parts = np.asarray(self.vertex_parts).astype(np.uint8).reshape(-1)
        _check(len(self.vertex_parts) == n_verts,
               f"body template: vertex_parts has {len(self.vertex_parts)} entries for {n_verts} vertices")
        _check(int(self.vertex_parts.max()) < len(self.part_names), "body template: vertex_parts outside part_names")
        self.phenotype_names = tuple(str(n) for n in _str_array(self.phenotype_names).reshape(-1))
        self.joint_names = tuple(str(n) for n in _str_array(self.joint_names).reshape(-1))
        from .expressions import validate_template_expressions

        validate_template_expressions(self)
        return self

    @classmethod
    def from_arrays(cls, arrays, prefix: str = "") -> "BodyTemplate":
        return cls(**_fields_from(cls, arrays, prefix, "body template")).validate()


# --- a fit -------------------------------------------------------------------------------------
@dataclass
class BodyFit(_ArrayRecord):
    """The fitted bodies of one photo (P people): shape, bind pose, photo pose, placement."""

    body_version: str
    person_ids: np.ndarray  # int32 [P]
    phenotypes: np.ndarray  # float32 [P,6]
    rest_vertices: np.ndarray  # float32 [P,V,3], model frame
    rest_bone_matrices: np.ndarray  # float32 [P,B,4,4], model frame
    rest_bone_tails: np.ndarray  # float32 [P,B,3], model frame
    bone_matrices: np.ndarray  # float32 [P,B,4,4], model frame
    placement: np.ndarray  # float32 [P,4,4], model -> camera
    vertices: np.ndarray  # float32 [P,V,3], camera frame
    joints: np.ndarray  # float32 [P,J,3], camera frame
    joints_estimated: np.ndarray  # bool [P,J]
    reports: tuple[str, ...]  # JSON per person
    expressions: np.ndarray | None = None  # float32 [P,E]: the photo's expression, template's names

    def index(self, person_id: int) -> int:
        hits = np.flatnonzero(self.person_ids == int(person_id))
        if not len(hits):
            raise BodyError(f"the body fit has no person {person_id}; fitted: {self.person_ids.tolist()}")
        return int(hits[0])

    def report(self, person_id: int) -> dict:
        try:
            return json.loads(self.reports[self.index(person_id)] or "{}")
        except json.JSONDecodeError:
            return {"notes": self.reports[self.index(person_id)]}

    def validate(self, template: BodyTemplate | None = None) -> "BodyFit":
        self.body_version = scalar_str(self.body_version)
        self.person_ids = np.asarray(self.person_ids).astype(np.int32).reshape(-1)
        p = len(self.person_ids)
        _check(len(set(self.person_ids.tolist())) == p, "body fit: person ids are not unique")

        def arr(name, dtype, tail):
            a = np.asarray(getattr(self, name))
            if dtype is bool:
                _check(a.dtype.kind == "b", f"body fit: {name} must be bool, got {a.dtype}")
            else:
                _check(a.dtype.kind in "fiu", f"body fit: {name} must be numeric, got {a.dtype}")
                a = a.astype(dtype)
                _check(bool(np.isfinite(a).all()), f"body fit: {name} holds NaN or infinite values")
            want = (p,) + tuple(tail)
            ok = a.ndim == len(want) and all(w is None or s == w for s, w in zip(a.shape, want))
            _check(ok, f"body fit: {name} must have shape {tuple('?' if w is None else w for w in want)}, "
                       f"got {a.shape}")
            setattr(self, name, a)
            return a

        arr("phenotypes", np.float32, (None,))
        rv = arr("rest_vertices", np.float32, (None, 3))
        rb = arr("rest_bone_matrices", np.float32, (None, 4, 4))
        n_verts, n_bones = rv.shape[1], rb.shape[1]
        arr("rest_bone_tails", np.float32, (n_bones, 3))
        arr("bone_matrices", np.float32, (n_bones, 4, 4))
        arr("placement", np.float32, (4, 4))
        arr("vertices", np.float32, (n_verts, 3))
        j = arr("joints", np.float32, (None, 3))
        arr("joints_estimated", bool, (j.shape[1],))
        if self.expressions is None:  # [P,0]: no values (the build fits them to the photo)
            self.expressions = np.zeros((p, 0), np.float32)
        arr("expressions", np.float32, (None,))
        self.reports = tuple(str(r) for r in _str_array(self.reports).reshape(-1))
        _check(len(self.reports) == p, f"body fit: {len(self.reports)} reports for {p} people")
        rot = self.placement[:, :3, :3].astype(np.float64)
        _check(bool(np.allclose(rot @ np.swapaxes(rot, 1, 2), np.eye(3), atol=1e-3)),
               "body fit: placement must be a rotation and a translation (no scale)")
        if template is not None:
            _check(self.body_version == template.body_version,
                   f"body fit was made for body model {self.body_version!r}, the template is "
                   f"{template.body_version!r}: fit again or fetch the matching template")
            _check(n_verts == template.num_vertices and n_bones == template.num_bones,
                   f"body fit has {n_verts} vertices and {n_bones} bones, the template "
                   f"{template.num_vertices} and {template.num_bones}")
            _check(self.expressions.shape[1] in (0, len(template.expression_names)),
                   f"body fit has {self.expressions.shape[1]} expression values, the template names "
                   f"{len(template.expression_names)}")
            _check(j.shape[1] == len(template.joint_names),
                   f"body fit has {j.shape[1]} joints, the template names {len(template.joint_names)}")
        return self

    @classmethod
    def from_arrays(cls, arrays, prefix: str = "", template: BodyTemplate | None = None) -> "BodyFit":
        return cls(**_fields_from(cls, arrays, prefix, "body fit")).validate(template)


# --- bodies inside a maps .npz ---------------------------------------------------------------
def has_body(maps) -> bool:
    """Whether ``maps`` (core.maps.canonical.Maps) carries a fit and its template."""
    return FIT_PREFIX + "person_ids" in maps.extras and "body_version" in maps.extras


def needs_fit(maps) -> bool:
    """Whether a body fit is still to be asked of the server for ``maps``: people and no fit yet
    (with nobody in the mask a fit request would only be refused; the build says so instead)."""
    return bool(maps.person_ids) and not has_body(maps)


def body_from_maps(maps) -> tuple[BodyTemplate, BodyFit] | None:
    """(template, fit) stored in the maps' extras (``body_*`` / ``fit_*`` keys), or None."""
    if not has_body(maps):
        return None
    template = BodyTemplate.from_arrays(maps.extras, TEMPLATE_PREFIX)
    return template, BodyFit.from_arrays(maps.extras, FIT_PREFIX, template)


def attach_body(maps, template: BodyTemplate, fit: BodyFit) -> None:
    """Store template and fit in ``maps.extras`` (they round-trip through ``Maps.save``/``load``)."""
    fit.validate(template)
    for key in [k for k in maps.extras if k.startswith((TEMPLATE_PREFIX, FIT_PREFIX))]:
        del maps.extras[key]
    maps.extras.update(template.to_arrays(TEMPLATE_PREFIX))
    maps.extras.update(fit.to_arrays(FIT_PREFIX))
