# SPDX-License-Identifier: GPL-3.0-or-later
"""Part-based skinning weights: the fallback when Blender's bone heat fails.

Each vertex may only be weighted to the bones of its body part and their neighbours (a hand
vertex never follows the thigh it touches); among those, weights fall off with the fourth
power of the distance to the bone segment, keeping the ``max_influences`` strongest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .types import Skeleton, SurfaceMesh

_ALL = None  # clothing, background: any bone


def _bones_for_part(part: str) -> tuple[str, ...] | None:
    for side, s in (("Left", "L"), ("Right", "R")):
        if part.startswith(side + "_"):
            limb = part[len(side) + 1:]
            table = {
                "Upper_Arm": ("upper_arm", "clavicle", "forearm"),
                "Lower_Arm": ("forearm", "upper_arm", "hand"),
                "Hand": ("hand", "forearm", "thumb", "index", "middle", "ring", "pinky"),
                "Upper_Leg": ("thigh", "shin"),
                "Lower_Leg": ("shin", "thigh", "foot"),
                "Foot": ("foot", "toe", "shin"), "Shoe": ("foot", "toe", "shin"),
                "Sock": ("foot", "shin"),
            }
            if limb in table:
                extra = ("pelvis",) if limb == "Upper_Leg" else ()
                return tuple(f"{b}.{s}" for b in table[limb]) + extra
    if part == "Torso":
        return ("pelvis", "spine", "chest", "clavicle.L", "clavicle.R", "neck")
    if part in ("Face_Neck", "Hair", "Eyeglass", "Lower_Lip", "Upper_Lip", "Lower_Teeth",
                "Upper_Teeth", "Tongue"):
        return ("head", "neck")
    return _ALL


@dataclass
class VertexWeights:
    bone_names: list
    indices: np.ndarray  # int32 [N,K] into bone_names
    weights: np.ndarray  # float32 [N,K], rows sum to 1 (0 for unused slots)

    def group(self, bone: str):
        """(vertex indices, weights) of one bone's vertex group (non-zero weights only)."""
        b = self.bone_names.index(bone)
        hit = (self.indices == b) & (self.weights > 0)
        rows = np.nonzero(hit.any(axis=1))[0]
        return rows.astype(np.int32), (self.weights * hit).sum(axis=1)[rows].astype(np.float32)


def part_based_weights(mesh: SurfaceMesh, skeleton: Skeleton, part_names, max_influences: int = 4,
                       chunk: int = 65536) -> VertexWeights:
    """Weights of every mesh vertex to the skeleton's bones (every vertex gets some)."""
    names = list(skeleton.names)
    nb = len(names)
    allowed_by_part = np.ones((max(len(part_names), 1), nb), bool)
    for pid, part in enumerate(part_names):
        bones = _bones_for_part(str(part))
        if bones is not _ALL:
            row = np.isin(names, bones)
            allowed_by_part[pid] = row if row.any() else True
    parts = np.minimum(mesh.vertex_parts.astype(np.int64), len(allowed_by_part) - 1)
    k = min(max_influences, nb)
    idx_out = np.zeros((len(mesh.vertices), k), np.int32)
    w_out = np.zeros((len(mesh.vertices), k), np.float32)
    heads, tails = skeleton.heads[None], skeleton.tails[None]
    seg = tails - heads
    seg_len2 = np.maximum((seg ** 2).sum(-1), 1e-12)
    for start in range(0, len(mesh.vertices), chunk):
        p = mesh.vertices[start:start + chunk].astype(np.float64)[:, None, :]
        t = np.clip(((p - heads) * seg).sum(-1) / seg_len2, 0.0, 1.0)
        d = np.linalg.norm(p - (heads + t[..., None] * seg), axis=-1)
        score = 1.0 / np.maximum(d, 0.005) ** 4
        score = np.where(allowed_by_part[parts[start:start + chunk]], score, 0.0)
        top = np.argsort(-score, axis=1)[:, :k]
        ws = np.take_along_axis(score, top, axis=1)
        ws = ws / np.maximum(ws.sum(axis=1, keepdims=True), 1e-30)
        idx_out[start:start + chunk] = top
        w_out[start:start + chunk] = ws
    return VertexWeights(names, idx_out, w_out)
