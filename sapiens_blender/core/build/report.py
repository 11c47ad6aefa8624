# SPDX-License-Identifier: GPL-3.0-or-later
"""What a build made, as typed records (bpy-free): the Blender layer fills them in, the CLI, the
panel and the batch read them by attribute. ``to_dict()`` gives the JSON-ready form.

The per-stage measurements that the geometry core returns (the surface's clean-up counts, the
joints' sources and fills, the fit's own report, the clothing and texture bakes) stay plain
dicts of numbers and names: they are facts to print or store, nothing branches on them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..body.guessed import summary as guessed_summary


def _plain(value):
    """JSON-ready: tuples to lists, numpy scalars to Python numbers, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # strict JSON has no NaN (e.g. a reprojection check that had nothing to check)
    return value


@dataclass
class SkinningReport:
    """How a mesh was weighted to its armature (blender.skinning.skin)."""

    method: str  # 'auto' (bone heat, part weights where it fails) or 'parts'
    vertices: int
    fallback_vertices: int = 0  # weighted by part-based weights (bone heat left them, or 'parts')
    unweighted_vertices: int = 0  # still without weight at the end (a warning when > 0)
    max_influences: int | None = None  # after the weights were constrained to their parts
    proxy_vertices: int | None = None  # bone heat ran on a coarser proxy of this many vertices
    auto_error: str | None = None  # bone heat failed outright with this message

    def to_dict(self) -> dict:
        return {k: v for k, v in _plain(asdict(self)).items() if v is not None}


@dataclass
class BodyReport:
    """One person's fitted body (blender.body.build_person_body)."""

    mode: str  # 'minimal' or 'clothed'
    vertices: int
    faces: int
    bones: int = 0
    parts: list[str] = field(default_factory=list)  # the part materials it has
    warnings: list[str] = field(default_factory=list)
    fit: dict = field(default_factory=dict)  # the fit's own report (from the server or the fitter)
    clothing: dict | None = None  # 'clothed': seen/dressed vertices, max_thickness_m, note
    texture: dict | None = None  # the texture bake: texels, seen_texels, size
    expressions: int = 0  # ARKit shape keys on the mesh (0: none, or --no-expressions)
    expression_source: str | None = None  # where their values come from (core/body/expression_fit.py)
    # {ARKit name: value} of the keys set above EXPRESSION_SHOWN (rounded to 0.01); {} neutral
    expression_values: dict | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in _plain(asdict(self)).items() if v is not None}


EXPRESSION_SHOWN = 0.05  # a key at or below this reads as neutral in the report


def expression_summary(values: dict | None) -> str:
    """The face's expression in one line, strongest keys first ('' when not set)."""
    if values is None:
        return ""
    if not values:
        return "neutral"
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(values.items(), key=lambda kv: -kv[1]))


# Past these the fitted body is said to match its person poorly (a warning, not an error: the
# body is still built). On the ground truth: 0.1-0.4 % and 1-3 mm; 1 % and 5 mm with noise.
POOR_FIT_REPROJECTION_PCT = 3.0
POOR_FIT_SURFACE_M = 0.03
# Where the depth is the offline backend's guess from the person's outline (the fit's report says
# "guessed ..."), loose clothing alone puts the body a few cm behind it: on bench_real's 46 real
# people the median is 2.7 cm and 16 were over 3 cm; over 5 cm only a painted figurine (11.8 cm)
# and two bodies matching no labelled person.
POOR_FIT_GUESSED_SURFACE_M = 0.05


def _guessed_depth(fit: dict) -> bool:
    return str(fit.get("depth") or "").startswith("guessed")


def fit_summary(fit: dict) -> str:
    """One line on how well the body fit its person (the fit's report), '' if it says nothing."""
    parts = []
    if fit.get("reprojection_px") is not None:
        pct = fit.get("reprojection_pct")
        parts.append(f"{fit['reprojection_px']:.1f} px from the keypoints"
                     + (f" ({pct:.1f} % of the person's size)" if pct is not None else ""))
    if fit.get("surface_residual_m") is not None:
        parts.append(f"surface {1000 * fit['surface_residual_m']:.0f} mm from the "
                     f"{'guessed' if _guessed_depth(fit) else 'observed'} one (median)")
    if fit.get("depth"):
        parts.append(f"depth {fit['depth']}")
    folds = fit.get("limb_folds")
    if folds and folds.get("guessed"):  # no depth at these joints: both folds were fitted
        turned = set(folds.get("flipped", ()))
        parts.append("no depth at the " + " and ".join(
            n.replace("_", " ") + (" (its other fold fitted better)" if n in turned else "")
            for n in folds["guessed"]))
    if fit.get("seconds") is not None:
        parts.append(f"{fit['seconds']:.1f} s")
    return ", ".join(parts)


def fit_warnings(fit: dict) -> list[str]:
    """What a user should check about a fit, from its report."""
    out = []
    pct = fit.get("reprojection_pct")
    if pct is not None and pct > POOR_FIT_REPROJECTION_PCT:
        out.append(f"the body lies {pct:.1f} % of the person's size from its keypoints on average: some "
                   "keypoints may be wrong (an occluded limb, two people mixed up); compare the body with "
                   "the photo")
    res = fit.get("surface_residual_m")
    if res is not None and _guessed_depth(fit):
        if res > POOR_FIT_GUESSED_SURFACE_M:
            out.append(f"the body's surface is {100 * res:.1f} cm from the depth guessed from this person's "
                       "outline (median): the outline may hold more than this person (a neighbour, something "
                       "carried) or not be a person; compare the body with the photo")
    elif res is not None and res > POOR_FIT_SURFACE_M:
        out.append(f"the body's surface is {100 * res:.1f} cm from the observed surface (median): the "
                   "depth may be off for this person")
    return out


@dataclass
class PersonReport:
    """One person's products: what was built, what was kept, and the facts about them."""

    built: list[str] = field(default_factory=list)  # products made by this build
    kept: list[str] = field(default_factory=list)  # products found from an earlier build
    notes: list[str] = field(default_factory=list)  # information, said once
    warnings: list[str] = field(default_factory=list)  # problems the user should look at
    vertices: int = 0  # the relief mesh (0: none, e.g. the body alone)
    faces: int = 0
    parts: list[str] = field(default_factory=list)  # the mesh's part materials
    bones: int = 0  # the relief mesh's armature
    estimated_bones: int = 0  # of those, placed from joints filled in (not seen)
    body_bones: int = 0  # the body's armature
    surface: dict = field(default_factory=dict)  # the surface's clean-up counts (core.geometry.surface)
    joints: dict = field(default_factory=dict)  # where the joints came from, which were filled
    skinning: SkinningReport | None = None
    body: BodyReport | None = None

    def note_product(self, product: str, built: bool) -> None:
        """Record ``product`` as built or kept, once (the ensure steps run more than once)."""
        if product not in self.built and product not in self.kept:
            (self.built if built else self.kept).append(product)

    def lines(self, person_id: int, has_mesh: bool) -> list[str]:
        """One line of facts per product, then the notes and warnings, each said once."""
        lines = []
        if self.body is not None:
            b = self.body
            thickness = (b.clothing or {}).get("max_thickness_m")
            lines.append(f"  person {person_id}: body ({b.mode}), {b.vertices} vertices, {b.bones} bones, "
                         f"{len(b.parts)} part materials"
                         + (f", clothing up to {100 * thickness:.1f} cm" if thickness else ""))
            fit_line = fit_summary(b.fit)
            if fit_line:
                lines.append(f"    fit: {fit_line}")
            face_line = expression_summary(b.expression_values)
            if face_line:
                lines.append(f"    face: {face_line}")
            guessed_line = guessed_summary(b.fit.get("guessed"))
            if guessed_line:  # which limbs the photo did not show (the body's vertex groups say too)
                lines.append(f"    guessed: {guessed_line}")
        if has_mesh:
            lines.append(
                f"  person {person_id}: {self.vertices} vertices, {self.faces} faces, "
                f"{len(self.parts)} parts, {self.bones} bones"
                + (f", skinning {self.skinning.method}" if self.skinning is not None else "")
                + (f" (kept: {', '.join(self.kept)})" if self.kept else ""))
        lines += [f"    note: {note}" for note in self.notes]
        lines += [f"    warning: {warning}" for warning in self.warnings]
        return lines

    def to_dict(self) -> dict:
        out = _plain(asdict(self))
        out["skinning"] = self.skinning.to_dict() if self.skinning is not None else None
        out["body"] = self.body.to_dict() if self.body is not None else None
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class BuildReport:
    """The whole build: its analysis and what it added to the scene besides the people."""

    source: str = ""  # where the maps came from (the photo, a .npz)
    metric: bool = False  # metric depth (sizes measured) or relative (only plausible)
    size: tuple[int, int] = (0, 0)  # the maps' width, height in pixels
    analysis: str | None = None  # the analysis key the build's objects are tagged with
    added: list[str] = field(default_factory=list)  # scene extras made: 'world', 'light'
    warning: str = ""  # about the whole build (e.g. relative depth)
    skipped: list[str] = field(default_factory=list)  # people that could not be built, and why

    def to_dict(self) -> dict:
        return _plain(asdict(self))
