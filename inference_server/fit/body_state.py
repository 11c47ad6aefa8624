# SPDX-License-Identifier: GPL-3.0-or-later
"""What the body model's passes hand each other (body_model.BodyModel): the shaped body at rest,
a fixed vertex subsample with its rows taken once, and the posed skeleton."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class RestState:
    """The shaped body at rest (everything that does not depend on the pose)."""

    coeffs: torch.Tensor
    heads: torch.Tensor
    tails: torch.Tensor
    poses: torch.Tensor  # rest bone matrices [P,B,4,4]
    subset: torch.Tensor  # rest positions of the skeleton pass's vertices
    vertices: torch.Tensor | None = None
    sample: torch.Tensor | None = None  # rest positions of a VertexSample's skinned set
    inverse: torch.Tensor | None = None  # P^-1 and P_p^-1 P_c [P,B,4,4]: kinematics.Chain's
    relative: torch.Tensor | None = None

    def _map(self, fn) -> "RestState":
        return RestState(*(None if x is None else fn(x) for x in (getattr(self, f.name) for f in fields(self))))

    def detach(self) -> "RestState":
        return self._map(lambda x: x.detach())

    def expand(self, n: int) -> "RestState":
        """One person's rest body repeated ``n`` times (views, no copies)."""
        return self._map(lambda x: x.expand(n, *x.shape[1:]))


@dataclass
class VertexSample:
    """A fixed subset of the mesh with its blendshape and skin-weight rows taken once: the
    fit's surface terms shape and skin only these vertices, not the whole mesh. They are shaped
    and skinned in one set with the skeleton pass's vertices (those first, then the sample's
    others): one blend and one skinning per evaluation instead of two each."""

    index: torch.Tensor  # [S] vertex ids
    template: torch.Tensor  # [M,3] the skinned set: the skeleton pass's vertices, then the rest of the sample's
    blendshapes: torch.Tensor  # [C,M,3]
    weights: torch.Tensor  # [M,B] dense skin weights
    rows: torch.Tensor  # [S] each sample vertex's row in the skinned set
    skinned: torch.Tensor  # [M] the skinned set's vertex ids


@dataclass
class Skeleton:
    joints: torch.Tensor  # [P,J,3] model frame, JOINT_NAMES order
    bone_poses: torch.Tensor  # [P,B,4,4]
    rest_bone_poses: torch.Tensor  # [P,B,4,4]
    transforms: torch.Tensor  # [P,B,4,4] = bone_poses @ inv(rest_bone_poses)
