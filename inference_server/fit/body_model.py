# SPDX-License-Identifier: GPL-3.0-or-later
"""The parametric body (``anny``) behind the fit, and the arrays of docs/body_format.md.

Two forward passes:
- ``skeleton()``: shape -> rest bones -> forward kinematics -> the fit's joints, skinning only
  the vertices the (pruned) joint regressor reads: the keypoint stages of the fit run on it.
- ``full()``: the whole skinned mesh (for the surface terms and the final answer).

Pose variables: one rotation vector per bone, in the bone's rest frame relative to its parent
(Blender's pose-bone rotation; zero = anny's rest pose), the root's kept at rest: the body's placement in the camera is a separate
rigid transform, so the model frame stays anny's (Z up, facing -Y) for the Blender side.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

import numpy as np
import torch

from .body_state import RestState, Skeleton, VertexSample
from . import face_landmarks
from .correspondences import JOINT_NAMES, JOINT_SOURCES, part_of_bone, part_names
from .expressions import load_basis as load_expressions, template_arrays as expression_arrays
from .kinematics import Chain
from .phenotype_basis import PhenotypeBasis
from .procrustes import special_procrustes

FORMAT_VERSION = 3  # bump when any template array's meaning changes (2: the expressions; 3: the face
# landmark vertices calibrated on the detector)
PHENOTYPE_NAMES = ("gender", "age", "muscle", "weight", "height", "proportions")


def cache_dir() -> Path:
    """Where anny keeps its ~0.8 GB model cache: ANNY_CACHE_DIR, else the user's cache folder."""
    if os.environ.get("ANNY_CACHE_DIR"):
        return Path(os.environ["ANNY_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "anny"


def cache_ready() -> bool:
    """Whether anny's cache exists (else the first load takes ~80 s to build it)."""
    d = cache_dir()
    return d.is_dir() and any(d.iterdir())


def rotvec_to_matrix(rotvec: torch.Tensor) -> torch.Tensor:
    """Rodrigues' formula, smooth at zero (the fit starts at zero rotations)."""
    theta2 = (rotvec * rotvec).sum(-1, keepdim=True)
    theta = torch.sqrt(theta2 + 1e-12)
    small = theta2 < 1e-8
    a = torch.where(small, 1.0 - theta2 / 6.0, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta2 / 24.0, (1.0 - torch.cos(theta)) / (theta2 + 1e-12))
    x, y, z = rotvec.unbind(-1)
    zero = torch.zeros_like(x)
    k = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], -1).reshape(*rotvec.shape[:-1], 3, 3)
    eye = torch.eye(3, dtype=rotvec.dtype, device=rotvec.device).expand_as(k)
    return eye + a[..., None] * k + b[..., None] * (k @ k)


class BodyModel:
    """anny loaded once per process, with the index tables the fit needs."""

    _lock = threading.Lock()
    _instances: dict = {}

    def __init__(self, anny_model, regressor, device: torch.device, dtype: torch.dtype):
        import anny

        self.anny = anny_model
        self.device, self.dtype = device, dtype
        # The rest bones' rotations without torch.linalg.eigh (procrustes.py): None = on CUDA.
        self.sync_free: bool | None = None
        self.bone_names = list(anny_model.bone_labels)
        self.bone_index = {n: i for i, n in enumerate(self.bone_names)}
        self.parents = [int(p) for p in anny_model.bone_parents]
        self.version = f"anny-{getattr(anny, '__version__', 'unknown')}/anny/{FORMAT_VERSION}"
        labels = list(regressor.labels)
        reg_rows = [labels.index(src[1]) for src in JOINT_SOURCES if src[0] == "regressor"]
        w = torch.zeros_like(regressor.regression_weights, dtype=dtype, device=device)
        w[reg_rows] = _pruned_rows(regressor.regression_weights[reg_rows]).to(device, dtype)
        # The skeleton pass skins only the vertices the (pruned) regressor reads.
        used = torch.nonzero(w[reg_rows].abs().sum(0) > 0).flatten()
        end_child, end_vertex = self._bone_ends(anny_model)
        used = torch.unique(torch.cat([used, end_vertex.to(used.device)]))
        self._end_child = end_child.to(device)
        self._end_is_child = (end_child >= 0).to(device)
        self._end_child = self._end_child.clamp_min(0)
        pos = {int(v): i for i, v in enumerate(used.tolist())}
        self._end_vertex_sub = torch.tensor([pos[int(v)] for v in end_vertex], device=device)
        w = w[:, used]
        self._reg_rows = reg_rows
        self._reg_vertices = used  # the vertex subset the skeleton pass skins
        self._reg_weights = w[reg_rows]  # [Jr, S]
        self._bs_sub = anny_model.blendshapes[:, used].to(device, dtype)  # [C,S,3]
        self._tmpl_sub = anny_model.template_vertices[used].to(device, dtype)
        self._w_sub = self._dense_weights(used)
        self._joint_plan = self._plan_joints()
        # anny's phenotype -> coefficient map in a dozen operations (None: anny's own is used)
        self._phenotype_basis = PhenotypeBasis.of(anny_model)
        self._homogeneous_row = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=dtype, device=device)
        self._chain = Chain(anny_model.kinematic_chain_levels, anny_model.kinematic_chain_indices, device, dtype)

    def _dense_weights(self, vertices: torch.Tensor | None = None) -> torch.Tensor:
        """Skin weights as a dense [V,B] matrix (of ``vertices``, else all), on the model's device:
        blending the transforms is then one small matmul (a gather of per-influence transforms
        is ~10x slower to differentiate)."""
        m = self.anny
        wi, ww = m.vertex_bone_indices.long(), m.vertex_bone_weights.to(self.dtype)
        if vertices is not None:
            wi, ww = wi[vertices], ww[vertices]
        dense = torch.zeros((len(wi), len(self.bone_names)), dtype=self.dtype, device=wi.device)
        return dense.scatter_add_(1, wi, ww).to(self.device)

    def _bone_ends(self, m):
        """Per bone: the child whose head ends it (-1 if none) and its farthest own vertex
        (computed once, on the CPU)."""
        with torch.no_grad():
            rest = m.template_vertices.cpu()
            heads = m.template_bone_heads.cpu()
            rot = special_procrustes(m.bone_template_orientation_matrices.cpu())
            y = rot[:, :, 1]
            wi, wv = m.vertex_bone_indices.long().cpu(), m.vertex_bone_weights.cpu()
            dominant = wi[torch.arange(len(wi)), wv.argmax(1)]
            child, vertex = [], []
            for b in range(len(self.bone_names)):
                kids = [c for c, par in enumerate(self.parents) if par == b]
                along = [float(((heads[c] - heads[b]) * y[b]).sum()) for c in kids]
                best = int(np.argmax(along)) if kids else -1
                child.append(kids[best] if kids and along[best] > 0.005 else -1)
                own = torch.nonzero(dominant == b).flatten()
                if len(own) == 0:
                    own = torch.arange(len(rest))[:1]
                proj = ((rest[own] - heads[b]) * y[b]).sum(-1)
                vertex.append(int(own[proj.argmax()]))
        return torch.tensor(child), torch.tensor(vertex)

    # --- loading ---------------------------------------------------------------------------
    @classmethod
    def load(cls, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
             progress=None) -> "BodyModel":
        """The process-wide model for ``device``/``dtype``. ``progress(stage, fraction, message)``
        hears about the one-off cache build on a machine's first run."""
        key = (str(device), dtype)
        with cls._lock:
            if key not in cls._instances:
                os.environ.setdefault("ANNY_CACHE_DIR", str(cache_dir()))
                first = not cache_ready()
                if progress is not None:
                    progress("preparing the body model", None,
                             "preparing the body model, first run only (~1-2 min)" if first
                             else "loading the body model")
                import anny

                model = anny.Anny(skinning_method="lbs").to(device=torch.device(device), dtype=dtype)
                regressor = anny.KeypointsRegressor.coco(model)
                cls._instances[key] = cls(model, regressor, torch.device(device), dtype)
            return cls._instances[key]

    # --- joints ----------------------------------------------------------------------------
    def _plan_joints(self):
        reg, head, tail = [], [], []
        r = 0
        for j, (kind, name) in enumerate(JOINT_SOURCES):
            if kind == "regressor":
                reg.append((j, r))
                r += 1
            elif kind == "head":
                head.append((j, self.bone_index[name]))
            elif kind == "tail":
                tail.append((j, self.bone_index[name]))
        as_t = lambda pairs: tuple(torch.tensor([p[k] for p in pairs], dtype=torch.long, device=self.device)  # noqa: E731
                                   for k in (0, 1))
        return as_t(reg), as_t(head), as_t(tail)

    # --- forward passes --------------------------------------------------------------------
    def shape_coefficients(self, phenotypes: torch.Tensor) -> torch.Tensor:
        """[P,6] phenotypes in [0,1] -> anny's blendshape coefficients."""
        if self._phenotype_basis is not None:
            return self._phenotype_basis(phenotypes)
        m = self.anny
        p = phenotypes.shape[0]
        empty = torch.zeros((p, 0), dtype=phenotypes.dtype, device=phenotypes.device)
        return m._get_phenotype_blendshape_coefficients(phenotypes, empty, empty)

    def rest_bones(self, coeffs: torch.Tensor, sub_rest: torch.Tensor | None = None):
        """Rest bone heads, tails and poses [P,B,...] for blendshape coefficients.

        anny orients bones by a Procrustes fit ('cached'): the Y axis is close to, not exactly
        on, the head->child line, and anny has no tails. Blender needs Y from head to tail, so
        each tail is put on the bone's own Y axis, as far as its farthest child head (or, for a
        last bone, its farthest own vertex: finger tips, toe tips, the top of the head).
        """
        m = self.anny
        p = coeffs.shape[0]
        heads = m.template_bone_heads[None] + torch.einsum("cbd,pc->pbd", m.bone_heads_blendshapes, coeffs)
        mats = m.bone_template_orientation_matrices[None] + torch.einsum(
            "pc,ckij->pkij", coeffs, m.bone_orientation_blendshapes)
        # anny's is roma's: the same to float rounding, 2.4x faster. On a GPU without eigh, whose
        # error check reads the device back (a CUDA graph cannot hold that; graph_solver.py).
        rot = special_procrustes(mats, sync_free=mats.is_cuda if self.sync_free is None else self.sync_free)
        if m.rest_orientation_refiner is not None:
            rot = m.rest_orientation_refiner(rot, heads)
        if m.root_identity_orientation:
            rot = rot.clone()
            rot[:, 0] = torch.eye(3, dtype=rot.dtype, device=rot.device)
        # [R | h] over [0 0 0 1] (a constant: writing a Python number into a device tensor is a
        # host-to-device copy, which a CUDA graph cannot hold: graph_solver.py)
        bottom = self._homogeneous_row.to(rot.dtype).expand(p, len(self.bone_names), 1, 4)
        poses = torch.cat([torch.cat([rot, heads[..., None]], -1), bottom], -2)
        if sub_rest is None:
            sub_rest = self._rest_subset(coeffs)
        y = rot[..., :, 1]
        ends = torch.where(self._end_is_child[None, :, None], heads[:, self._end_child],
                           sub_rest[:, self._end_vertex_sub])
        length = ((ends - heads) * y).sum(-1, keepdim=True).clamp_min(0.01)
        return heads, heads + y * length, poses

    def _rest_subset(self, coeffs: torch.Tensor) -> torch.Tensor:
        return self._tmpl_sub[None] + torch.einsum("csd,pc->psd", self._bs_sub, coeffs)

    def pose_bones(self, rest: "RestState", rotvecs: torch.Tensor):
        """(transforms, bone_poses) [P,B,4,4] for per-bone rotation vectors [P,B,3].

        Each rotation is in the bone's own rest frame, relative to its parent (Blender's pose-bone
        rotation): W_c = W_p (P_p^-1 P_c) R_c, so zero rotations give exactly the rest pose.
        The root stays at rest: the placement in the camera is separate.
        """
        return self._chain.pose(rest.poses, rest.inverse, rest.relative, rotvec_to_matrix(rotvecs))

    def _joints(self, reg_points: torch.Tensor, heads: torch.Tensor, tails: torch.Tensor,
                transforms: torch.Tensor) -> torch.Tensor:
        (rj, rr), (hj, hb), (tj, tb) = self._joint_plan
        p = transforms.shape[0]
        out = torch.zeros((p, len(JOINT_NAMES), 3), dtype=transforms.dtype, device=transforms.device)
        out[:, rj] = reg_points[:, rr]
        posed_heads = _apply(transforms[:, hb], heads[:, hb])
        posed_tails = _apply(transforms[:, tb], tails[:, tb])
        out[:, hj] = posed_heads
        out[:, tj] = posed_tails
        return out

    def vertex_sample(self, index: torch.Tensor) -> VertexSample:
        index = torch.as_tensor(index, dtype=torch.long, device=self.device)
        m = self.anny
        skeleton = self._reg_vertices.to(self.device)
        others = index[~torch.isin(index, skeleton)]
        merged = torch.cat([skeleton, torch.unique(others)])
        row_of = torch.full((len(m.template_vertices),), -1, dtype=torch.long, device=self.device)
        row_of[merged] = torch.arange(len(merged), device=self.device)
        return VertexSample(index, m.template_vertices[merged].to(self.device, self.dtype),
                            m.blendshapes[:, merged].to(self.device, self.dtype), self._dense_weights(merged),
                            row_of[index], merged)

    def rest_state(self, phenotypes: torch.Tensor, with_vertices: bool = False,
                   sample: VertexSample | None = None) -> "RestState":
        """Everything that depends on the shape alone: with the whole rest mesh
        (``with_vertices``) or the rest positions of ``sample`` only. The fit keeps it between
        steps while the shape is held (the phenotype -> blendshape -> Procrustes chain is most of
        a step's cost)."""
        coeffs = self.shape_coefficients(phenotypes)
        rest_vertices = self.anny.get_rest_vertices(coeffs) if with_vertices else None
        rest_sample = None
        if with_vertices:
            rest_sub = rest_vertices[:, self._reg_vertices]
        elif sample is not None:  # the skeleton pass's vertices are the skinned set's first rows
            rest_sample = sample.template[None] + torch.einsum("csd,pc->psd", sample.blendshapes, coeffs)
            rest_sub = rest_sample[:, :len(self._reg_vertices)]
        else:
            rest_sub = self._rest_subset(coeffs)
        heads, tails, poses = self.rest_bones(coeffs, rest_sub)
        if with_vertices and sample is not None:
            rest_sample = rest_vertices[:, sample.skinned]
        return RestState(coeffs, heads, tails, poses, rest_sub, rest_vertices, rest_sample,
                         *self._chain.rest_factors(poses))

    def skeleton(self, phenotypes, rotvecs: torch.Tensor) -> Skeleton:
        """Joints without skinning the mesh: the cheap pass of the keypoint stages.
        ``phenotypes`` [P,6], or a RestState to reuse."""
        rs = phenotypes if isinstance(phenotypes, RestState) else self.rest_state(phenotypes)
        transforms, poses = self.pose_bones(rs, rotvecs)
        blended = torch.einsum("sb,pbij->psij", self._w_sub, transforms[..., :3, :])  # [P,S,3,4]
        skinned = (blended[..., :3] @ rs.subset[..., None])[..., 0] + blended[..., 3]
        reg = torch.einsum("js,psd->pjd", self._reg_weights, skinned)
        return Skeleton(self._joints(reg, rs.heads, rs.tails, transforms), poses, rs.poses, transforms)

    def sampled(self, rest: "RestState", rotvecs: torch.Tensor, sample: VertexSample):
        """(joints [P,J,3], the posed vertices of ``sample`` [P,S,3]) without skinning the rest
        of the mesh: the surface terms read a fixed subsample, so only it is skinned. ``rest``
        made with this ``sample``."""
        transforms, _poses = self.pose_bones(rest, rotvecs)
        blended = torch.einsum("sb,pbij->psij", sample.weights, transforms[..., :3, :])
        skinned = (blended[..., :3] @ rest.sample[..., None])[..., 0] + blended[..., 3]
        reg = torch.einsum("js,psd->pjd", self._reg_weights, skinned[:, :len(self._reg_vertices)])
        joints = self._joints(reg, rest.heads, rest.tails, transforms)
        return joints, skinned[:, sample.rows]

    def full(self, phenotypes, rotvecs: torch.Tensor) -> dict:
        """The whole body: vertices, rest vertices, bones, joints (model frame).
        ``phenotypes`` [P,6], or a RestState made ``with_vertices`` to reuse."""
        rs = phenotypes if isinstance(phenotypes, RestState) else self.rest_state(phenotypes, True)
        transforms, poses = self.pose_bones(rs, rotvecs)
        vertices = self.anny.get_skinned_vertices(rs.vertices, transforms)
        reg = torch.einsum("js,psd->pjd", self._reg_weights, vertices[:, self._reg_vertices])
        joints = self._joints(reg, rs.heads, rs.tails, transforms)
        return dict(vertices=vertices, rest_vertices=rs.vertices, rest_bone_poses=rs.poses,
                    rest_bone_tails=rs.tails, bone_poses=poses, transforms=transforms, joints=joints)

    # --- the contract's arrays -------------------------------------------------------------
    @functools.cached_property
    def _template(self) -> dict:
        m = self.anny
        wb = m.vertex_bone_indices.cpu().numpy().astype(np.int32)
        wv = m.vertex_bone_weights.cpu().numpy().astype(np.float32)
        wv = wv / np.maximum(wv.sum(1, keepdims=True), 1e-12)
        wb = np.where(wv > 0, wb, 0).astype(np.int32)
        dominant = wb[np.arange(len(wb)), wv.argmax(1)]
        names = part_names()
        bone_part = np.array([names.index(part_of_bone(b)) for b in self.bone_names], np.uint8)
        return {
            "body_version": np.array(self.version),
            "faces": m.faces.cpu().numpy().astype(np.int32),
            "uv": m.texture_coordinates.cpu().numpy().astype(np.float32),
            "face_uv": m.face_texture_coordinate_indices.cpu().numpy().astype(np.int32),
            "bone_names": np.array(self.bone_names),
            "bone_parents": np.array(self.parents, np.int32),
            "weight_bones": wb,
            "weight_values": wv,
            "vertex_parts": bone_part[dominant],
            "part_names": np.array(names),
            "phenotype_names": np.array(PHENOTYPE_NAMES),
            "joint_names": np.array(JOINT_NAMES),
            **expression_arrays(),
            **face_landmarks.template_arrays(m, load_expressions()),
        }

    def template(self) -> dict[str, np.ndarray]:
        """The constant body data of docs/body_format.md (copies: callers may keep them)."""
        return {k: v.copy() for k, v in self._template.items()}

    @torch.no_grad()
    def evaluate(self, rotvecs, phenotypes, placement) -> dict[str, np.ndarray]:
        """Per-person arrays of docs/body_format.md for rotation vectors [P,B,3], phenotypes
        [P,6] and placements [P,4,4] (model -> camera frame); numpy or torch inputs."""
        as_t = lambda a: torch.as_tensor(np.asarray(a), dtype=self.dtype, device=self.device)  # noqa: E731
        rotvecs, phenotypes, placement = as_t(rotvecs), as_t(phenotypes), as_t(placement)
        out = self.full(phenotypes, rotvecs)
        rot, trans = placement[:, None, :3, :3], placement[:, None, :3, 3]
        cam = lambda x: (rot @ x[..., None])[..., 0] + trans  # noqa: E731
        joints = cam(out["joints"])
        np32 = lambda x: x.detach().cpu().numpy().astype(np.float32)  # noqa: E731
        return {
            "body_version": np.array(self.version),
            "phenotypes": np32(phenotypes),
            "rest_vertices": np32(out["rest_vertices"].expand(len(rotvecs), -1, -1)),
            "rest_bone_matrices": np32(out["rest_bone_poses"].expand(len(rotvecs), -1, -1, -1)),
            "rest_bone_tails": np32(out["rest_bone_tails"].expand(len(rotvecs), -1, -1)),
            "bone_matrices": np32(out["bone_poses"]),
            "placement": np32(placement),
            "vertices": np32(cam(out["vertices"])),
            "joints": np32(joints),
        }


REGRESSOR_MASS = 0.999


def _pruned_rows(weights: torch.Tensor, mass: float = REGRESSOR_MASS) -> torch.Tensor:
    """Each row of anny's (non-negative) joint regressor cut to the fewest vertices that hold
    ``mass`` of its weight, renormalised. The rows are spread thin (an ear reads 4,105 vertices,
    most with a weight under 1e-4): cut, the skeleton pass skins 2,360 vertices (with the bones'
    end vertices) instead of 8,852, and the joints move by 0.1 mm at most (tests/fit/test_body_model.py)."""
    w = weights.detach().double().cpu().clamp_min(0.0)
    order = torch.argsort(w, dim=1, descending=True)
    sorted_w = torch.gather(w, 1, order)
    before = torch.cumsum(sorted_w, 1) - sorted_w  # the mass of the heavier vertices
    keep_sorted = before < mass * w.sum(1, keepdim=True)
    keep = torch.zeros_like(keep_sorted).scatter_(1, order, keep_sorted)
    out = torch.where(keep, w, torch.zeros_like(w))
    return (out / out.sum(1, keepdim=True)).to(weights.dtype)


def _apply(m: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Apply 4x4 transforms [...,4,4] to points [...,3]."""
    return (m[..., :3, :3] @ x[..., None])[..., 0] + m[..., :3, 3]
