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
    allowed_by_part = _allowed(names, part_names)
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


HEAD_PARTS = ("Face_Neck", "Eyeglass", "Lower_Lip", "Upper_Lip", "Lower_Teeth", "Upper_Teeth", "Tongue")
# Along the neck bone (0 at its base, 1 at the head joint): below START a face/neck vertex
# follows the neck, above END the head, smoothly in between.
HEAD_BLEND = (0.45, 0.85)


CHIN_BAND = 0.08  # the head/neck blend around the chin, in neck-bone lengths


def _along_neck(vertices, base, top, chin, intrinsics):
    """(t per vertex along the neck bone: 0 at its base, 1 at the head joint; (lo, hi) blend)."""
    if chin is not None and intrinsics is not None:  # in the photo: the chin is a 2D keypoint
        from .skeleton import project_to_pixels

        pixels = project_to_pixels(np.asarray(vertices, np.float64), intrinsics)
        a0, a1 = project_to_pixels(np.stack([base, top]), intrinsics)
        axis = a1 - a0
        length2 = float(axis @ axis)
        if length2 > 1.0:  # the neck is at least a pixel long in the photo
            t = ((pixels - a0) @ axis) / length2
            t_chin = float((np.array([chin[1], chin[0]], np.float64) - a0) @ axis / length2)
            return t, (t_chin - CHIN_BAND, t_chin + CHIN_BAND)
    axis = top - base
    t = ((np.asarray(vertices, np.float64) - base) @ axis) / max(float(axis @ axis), 1e-12)
    return t, HEAD_BLEND


def _allowed(bone_names: list, part_names) -> np.ndarray:
    """bool [parts, bones]: which bones each body part may follow (all for unknown parts)."""
    allowed = np.ones((max(len(part_names), 1), len(bone_names)), bool)
    for pid, part in enumerate(part_names):
        bones = _bones_for_part(str(part))
        if bones is not _ALL:
            row = np.isin(bone_names, bones)
            allowed[pid] = row if row.any() else True
    return allowed


def constrain_weights(weights: np.ndarray, mesh: SurfaceMesh, skeleton: Skeleton, part_names,
                      fallback: VertexWeights | None = None, max_influences: int = 4,
                      chin: np.ndarray | None = None, intrinsics: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """Dense weights [N,B] (columns = skeleton.names, e.g. bone heat's) made to stay on their part.

    1. A vertex keeps only the bones its body part may follow (a torso vertex never follows the
       upper arm it touches); 2. face and neck vertices split their head+neck weight by height
       along the neck bone: above the chin (``chin`` = its (x, y) keypoint in the photo, with
       the ``intrinsics``) the head, below it the neck, blended over a short band; without a
       chin by HEAD_BLEND; hair follows the head;
    3. vertices left with nothing take ``fallback`` (part-based) weights; 4. at most
       ``max_influences`` bones per vertex (glTF/FBX carry 4), renormalised to sum 1.
    """
    names = list(skeleton.names)
    w = np.array(weights, np.float64, copy=True)
    parts = np.minimum(mesh.vertex_parts.astype(np.int64), max(len(part_names), 1) - 1)
    w *= _allowed(names, part_names)[parts]
    part_labels = np.array([str(p) for p in part_names] or [""])
    if "head" in names and "neck" in names:
        head, neck = names.index("head"), names.index("neck")
        label = part_labels[parts]
        facial, hair = np.isin(label, HEAD_PARTS), label == "Hair"
        t, (lo, hi) = _along_neck(mesh.vertices, skeleton.heads[neck], skeleton.tails[neck], chin, intrinsics)
        s = np.clip((t - lo) / (hi - lo), 0.0, 1.0)
        share = np.where(hair, 1.0, s * s * (3 - 2 * s))  # smoothstep
        split = facial | hair
        total = w[split, head] + w[split, neck]
        total = np.where(total > 0, total, 1.0)  # no weight on either yet: give it to them
        w[split, head], w[split, neck] = total * share[split], total * (1 - share[split])
    empty = w.sum(axis=1) <= 1e-6
    if empty.any() and fallback is not None:
        rows = np.flatnonzero(empty)
        col = np.array([names.index(b) for b in fallback.bone_names])
        w[rows] = 0.0
        np.add.at(w, (np.repeat(rows, fallback.indices.shape[1]), col[fallback.indices[rows]].ravel()),
                  fallback.weights[rows].ravel())
    k = min(max_influences, w.shape[1])
    if w.shape[1] > k:
        cut = np.argpartition(-w, k - 1, axis=1)[:, k:]
        np.put_along_axis(w, cut, 0.0, axis=1)
    total = w.sum(axis=1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0).astype(np.float32)
