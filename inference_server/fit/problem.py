# SPDX-License-Identifier: GPL-3.0-or-later
"""One person's fit problem: its variables (pose, shape, placement, depth scale), how they pose
the body and put it in the camera, its closed-form start, its observations as tensors and the
surface rounds' correspondences, and the plain baseline's loop. Its terms (keypoints, priors,
the dense surface and silhouette) are terms.GroupTerms', batched over a group's people.
solver.py stages these problems (group.py batches their evaluations); the method is there."""

from __future__ import annotations

import time

import numpy as np
import torch

from . import group_start, start
from .bones import BODY_BONES, BONE_EVIDENCE, BONE_PART, FINGER_BONES
from .body_model import rotvec_to_matrix
from .correspondences import JOINT_NAMES, is_finger
from .observations import PersonObservation
from .tensor_ops import keypoint_cost, pinhole, rescaled_depth, to_numpy64, vertex_normals
from .terms import GroupTerms


# The twist prior (per rad^2 of a bone's turn about its own axis), and where the hand is seen.
TWIST, TWIST_SEEN = 2.0, 0.05
HAND_SEEN = 6  # seen finger keypoints that count as a seen hand (fingers and forearm twist free)


class PersonProblem:
    """One person's variables and terms."""

    def __init__(self, fitter, obs: PersonObservation):  # fitter: solver.BodyFitter
        self.f, self.obs = fitter, obs
        self.wt = fitter.settings.weights
        self.polishing = False  # in the fit's last stage (solver.BodyFitter._polish)
        dt = fitter.settings.dtype
        self.dt, self.dev = dt, fitter.device
        var = lambda *shape: torch.zeros(shape, dtype=dt, device=self.dev, requires_grad=True)  # noqa: E731
        real = lambda a: torch.as_tensor(a, dtype=dt, device=self.dev)  # noqa: E731
        flag = lambda a: torch.as_tensor(a, device=self.dev)  # noqa: E731
        self.pose = fitter.neutral[None].clone()  # the bones not fitted keep anny's neutral posture
        self.pose_free = var(len(fitter._free), 3)
        self.pose_fingers = var(len(fitter._fingers), 3)
        self.shape_logit = var(1, 6)
        self.root_rot, self.root_t = var(3), var(3)
        # metres per unit of root_t (FitSettings.translation_unit; the plain baseline's are metres)
        self.t_unit = fitter.settings.translation_unit if obs.metric and not fitter.settings.plain else 1.0
        self.r0 = torch.eye(3, dtype=dt, device=self.dev)
        self.t0 = torch.zeros(3, dtype=dt, device=self.dev)
        self.log_depth_scale, self.depth_shift = var(), var()
        self.k, self.kp, self.w = real(obs.intrinsics), real(obs.keypoints), real(obs.weights)
        self.points = real(obs.points)
        self.covering = flag(obs.covering)
        self.point_parts = flag(obs.point_parts)
        self._matched = None
        # per point: its match on the surface less its subsample vertex, and that face's normal
        self._offset = self._point_normals = None
        self.cover_px = real(obs.cover_pixels)
        self._nn = None
        self._cover_nn = None  # per silhouette pixel, the nearest facing sample vertex
        self._normals = None
        self.folds, self.flipped = [], frozenset()  # limb folds the start guessed (init_limbs)
        self.fold_report = None  # set by the solver where it tried the other folds
        # Pose prior per free bone: light where keypoints see the bone, heavy where none does.
        seen = {n for n, wj in zip(JOINT_NAMES, obs.weights) if wj > 0}
        prior = []
        for bone in BODY_BONES:
            stem, side = bone.split(".")[0], ("left" if bone.endswith(".L") else "right")
            ev = BONE_EVIDENCE.get(stem)
            if ev is None:  # spine, neck, head: nothing measures them directly; their bends
                prior.append(10.0)  # would otherwise trade off against the body's height
            elif any(f"{side}_{e}" in seen for e in ev) or obs.part_seen(BONE_PART.get(stem, ""), side):
                prior.append(self.wt["prior_seen"])
            else:  # no keypoint and no segmentation part: a neutral limb, not noise
                prior.append(30.0)
        self.prior = real(prior)
        # Per side, the seen hand keypoints (indices into JOINT_NAMES), if enough to show the hand.
        self.hands = {}
        for side in ("left", "right"):
            hand = [j for j, n in enumerate(JOINT_NAMES) if n in seen and n.startswith(side) and is_finger(n)]
            self.hands[side] = hand if len(hand) >= HAND_SEEN else []
        side_of = lambda bone: "left" if bone.endswith(".L") else "right"  # noqa: E731
        self.finger_prior = real([0.3 if self.hands[side_of(b)] else 30.0 for b in FINGER_BONES])
        # Twist about a bone's own axis: held hard (one keypoint per bone does not see it), but
        # the forearm's (the hand turned palm up or down) is free where the hand's keypoints show
        # it: a hand across the belly is turned 90 degrees, which the hard prior undid.
        self.twist_prior = real([TWIST_SEEN if b.startswith("lowerarm01") and self.hands[side_of(b)] else TWIST
                                 for b in BODY_BONES])

    # --- variables -> body -------------------------------------------------------------------
    @property
    def depth_scale(self) -> torch.Tensor:
        return torch.exp(self.log_depth_scale)

    def rotvecs(self) -> torch.Tensor:
        rot = self.pose.clone()
        rot[0, self.f._free] = self.pose_free
        if self.f.settings.fingers:
            rot[0, self.f._fingers] = self.pose_fingers
        return rot

    def phenotypes(self) -> torch.Tensor:
        return torch.sigmoid(self.shape_logit * self.f.shape_scale)

    def placement(self) -> tuple[torch.Tensor, torch.Tensor]:
        return rotvec_to_matrix(self.root_rot) @ self.r0, self.t0 + self.root_t * self.t_unit

    def to_camera(self, x: torch.Tensor) -> torch.Tensor:
        r, t = self.placement()
        return x @ r.T + t

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return pinhole(x, self.k[0, 0], self.k[1, 1], self.k[0, 2], self.k[1, 2])

    # --- starts ------------------------------------------------------------------------------
    def _rest_joints(self) -> np.ndarray:
        with torch.no_grad():
            return to_numpy64(self.f.body.skeleton(self.phenotypes(), self.rotvecs()).joints[0])

    def init_size(self) -> None:
        """Start at the person's size: of bodies from a child to a tall adult (anny's age, then
        height phenotypes), the one whose bone lengths match the lifted keypoints (metric depth)."""
        group_start.init_sizes([self])

    def init_closed_form(self) -> None:
        group_start.start_closed_form([self])

    def other_fold(self, joint: int) -> "PersonProblem":
        """A second start for this person (after init_closed_form): the same size and placement,
        ``joint``'s limb folded the other way (one of ``folds``), the other limbs as the start
        turns them. Folds are guessed with metric depth only: no depth scale to start."""
        other = PersonProblem(self.f, self.obs)
        with torch.no_grad():
            other.shape_logit.copy_(self.shape_logit)
        other.r0, other.t0 = self.r0, self.t0
        other.init_limbs(frozenset({joint}))
        other.init_hands()
        return other

    def init_limbs(self, flip: frozenset = frozenset()) -> None:
        """Arms and legs turned in closed form (group_start.init_limbs); the joints in ``flip``
        take the other fold."""
        group_start.init_limbs([self], [flip])

    def init_hands(self, turns: int = 24) -> None:
        """Each forearm turned about its own axis to where its seen finger keypoints reproject
        best (keypoint term plus twist prior, as the loss weighs them), of ``turns`` angles round
        the circle. The loss is not convex in that twist: from the untwisted start, forearms
        turned 90 degrees (hands across the belly) were fitted with the hand upside down, its
        finger keypoints 10-20 px off (given up as outliers) and the elbow 4 cm off."""
        import roma

        free = {int(b): k for k, b in enumerate(self.f._free)}
        angle = torch.arange(turns, dtype=self.dt, device=self.dev) * (2 * np.pi / turns)
        angle = torch.remainder(angle + np.pi, 2 * np.pi) - np.pi  # [-pi, pi): 0 (no turn) is one
        spin = torch.zeros((turns, 3), dtype=self.dt, device=self.dev)
        spin[:, 1] = angle  # about the bone's own Y: the forearm's axis, the wrist stays put
        for side, s in (("left", "L"), ("right", "R")):
            hand = self.hands[side]
            if not hand:
                continue
            k = free[self.f.body.bone_index[f"lowerarm01.{s}"]]
            with torch.no_grad():
                base = rotvec_to_matrix(self.pose_free[k])
                turned = roma.rotmat_to_rotvec(base[None] @ rotvec_to_matrix(spin))  # [T,3]
                rot = self.rotvecs().expand(turns, -1, -1).clone()
                rot[:, self.f._free[k]] = turned
                joints = self.f.body.skeleton(self.phenotypes().expand(turns, -1), rot).joints[:, hand]
                px = self.project(self.to_camera(joints))
                cost = keypoint_cost(px, self.kp[hand], self.w[hand], self.obs.scale_px).sum(-1) \
                    / self.w.sum() + self.twist_prior[k] * turned[:, 1] ** 2
                self.pose_free[k] = turned[int(cost.argmin())]

    def _init_depth_scale(self) -> None:
        """Relative depth: the scale that puts the observed torso at the body's torso depth."""
        obs = self.obs
        sel = [j for j in range(len(JOINT_NAMES)) if obs.weights[j] > 0 and np.isfinite(obs.lifted[j])]
        if not sel:
            return
        with torch.no_grad():
            joints = self.to_camera(self.f.body.skeleton(self.phenotypes(), self.rotvecs()).joints[0])
        z = to_numpy64(joints[sel, 2])
        d = obs.lifted[sel]
        scale = float(np.median(z) / max(np.median(d), 1e-6))
        self.log_depth_scale.data.fill_(np.log(max(scale, 1e-6)))

    def init_plain(self) -> None:
        self._set_placement(*start.facing_the_camera(self.obs, self._rest_joints()))

    def _set_placement(self, r: np.ndarray, t: np.ndarray) -> None:
        self.r0 = torch.as_tensor(r, dtype=self.dt, device=self.dev)
        self.t0 = torch.as_tensor(t, dtype=self.dt, device=self.dev)

    # --- correspondences (the terms are terms.GroupTerms') -----------------------------------
    def pick_correspondences(self, verts: torch.Tensor | None = None) -> None:
        """The round's matches, held until the next round (ICP): ``verts`` the whole posed mesh
        in the camera frame (posed here when None). An evaluation skins the mesh's subsample
        only, so each point is matched twice: to its nearest point of the whole mesh's surface
        (the distance is measured there, along that face's normal; surface_match.py says why),
        and to the nearest subsample vertex, which carries that point through the round (their
        offset held)."""
        with torch.no_grad():
            if verts is None:
                out = self.f.body.full(self.phenotypes(), self.rotvecs())
                verts = self.to_camera(out["vertices"][0])
            normals = vertex_normals(verts, self.f._faces)
            facing_all = (normals * verts).sum(-1) < 0  # towards the camera
            self._normals = normals[self.f._sample]
            sample = verts[self.f._sample]
            cand = torch.nonzero(facing_all[self.f._sample]).flatten()
            if self.obs.has_depth and len(self.points):
                pts = self.points if self.obs.metric else rescaled_depth(self.points, self.depth_scale,
                                                                         self.depth_shift)
                # Each point matches the nearest facing vertex of a part its label allows
                # (a forearm's points pull the forearm, not the chest it hangs beside).
                if len(cand):
                    d = torch.cdist(pts, sample[cand])
                    d = torch.where(self.point_parts[:, self.f._sample_class[cand]], d, d + 1e3)
                    best = d.min(1)
                    self._nn = cand[best.indices]
                    self._matched = (best.values < 1e3).to(self.dt)
                    on, normal = self.f.surface.match(pts, verts, self._nn, facing_all, self.point_parts,
                                                      self.f._vertex_class)
                    self._offset = on - sample[self._nn]
                    self._point_normals = normal
                else:  # nothing faces the camera: no matches this round
                    self._nn = torch.zeros(len(pts), dtype=torch.long, device=self.dev)
                    self._matched = torch.zeros(len(pts), dtype=self.dt, device=self.dev)
                    self._offset = torch.zeros_like(pts)
                    self._point_normals = torch.zeros_like(pts)
            # Per silhouette pixel, the nearest facing point (found without autograd: cdist's
            # backward cost more than the rest of an evaluation); the distance is then
            # differentiated through it alone.
            px = self.project(sample)
            self._cover_nn = cand[torch.cdist(self.cover_px, px[cand]).argmin(1)] if len(cand) else None

    # --- optimisation ----------------------------------------------------------------------
    def _params(self, dense: bool):
        groups = [{"params": [self.pose_free], "lr": 0.04},
                  {"params": [self.root_rot], "lr": 0.02},
                  {"params": [self.root_t], "lr": 0.02},
                  {"params": [self.shape_logit], "lr": 0.08}]
        if self.f.settings.fingers:
            groups.append({"params": [self.pose_fingers], "lr": 0.05})
        if self.obs.has_depth and not self.obs.metric:
            groups.append({"params": [self.log_depth_scale, self.depth_shift], "lr": 0.01})
        return groups

    def plain_loss(self, terms, pick: bool) -> torch.Tensor:
        """The baseline's loss: the same terms (``terms``: this person's GroupTerms) on the
        whole mesh, its shape recomputed every step, its normals every step and its matches
        when ``pick`` (the staged fit's evaluations are group.Group's)."""
        v = terms.variables()
        out = self.f.body.full(self.f.body.rest_state(v.phenotypes, with_vertices=True), v.rotvecs)
        sample = out["vertices"][:, self.f._sample]
        with torch.no_grad():
            verts = v.to_camera(out["vertices"])[0]
            if pick:
                self.pick_correspondences(verts)
            else:  # the matches held, the normals of the body as it is now
                self._normals = vertex_normals(verts, self.f._faces)[self.f._sample]
            terms.new_round()
        loss = (terms.keypoints(out["joints"], v, self.wt["lift_dense"]) + terms.priors(v, out["joints"])
                + terms.surface(sample, v))
        return loss[0]

    def run_plain(self, max_steps: int, target_px: float | None, cancel=None, monitor=None,
                  started: float | None = None) -> int:
        opt = torch.optim.Adam(self._params(True))
        terms = GroupTerms([self])
        started = time.perf_counter() if started is None else started
        monitored = 0.0  # seconds spent in the monitor: not the baseline's own time
        for i in range(max_steps):
            if cancel is not None:
                cancel.check()
            opt.zero_grad(set_to_none=True)
            self.plain_loss(terms, pick=i % self.f.settings.refresh_every == 0).backward()
            opt.step()
            if i % 5 != 4:
                continue
            if target_px is not None and self.joint_error_px() <= target_px:
                return i + 1
            if monitor is not None:
                t = time.perf_counter()
                with torch.no_grad():
                    joints = self.to_camera(self.f.body.skeleton(self.phenotypes(), self.rotvecs()).joints[0])
                stop = monitor(self.obs.person_id, i + 1, t - started - monitored, to_numpy64(joints),
                               self.joint_error_px())
                monitored += time.perf_counter() - t
                if stop:
                    return i + 1
        return max_steps

    # --- results ----------------------------------------------------------------------------
    def joint_error_px(self) -> float:
        with torch.no_grad():
            joints = self.to_camera(self.f.body.skeleton(self.phenotypes(), self.rotvecs()).joints[0])
            err = (self.project(joints) - self.kp).norm(dim=-1)
            m = self.w > 0
            return float(err[m].mean()) if m.any() else float("nan")

    def surface_residual(self) -> float:
        """The median distance (m) of the skin points to the body's surface (surface_match)."""
        with torch.no_grad():
            out = self.f.body.full(self.phenotypes(), self.rotvecs())
            verts = self.to_camera(out["vertices"][0])
            pts = self.points
            if not len(pts):
                return float("nan")
            if not self.obs.metric:
                pts = rescaled_depth(pts, self.depth_scale, self.depth_shift)
            skin = pts[~self.covering]
            if not len(skin):
                return float("nan")
            carrier = torch.cdist(skin, verts[self.f._sample]).argmin(1)
            anywhere = torch.ones(len(verts), dtype=torch.bool, device=self.dev)
            any_part = torch.ones((len(skin), self.point_parts.shape[1]), dtype=torch.bool, device=self.dev)
            on, _normal = self.f.surface.match(skin, verts, carrier, anywhere, any_part, self.f._vertex_class)
            return float((skin - on).norm(dim=-1).median())

    def result(self):
        with torch.no_grad():
            r, t = self.placement()
            placement = np.eye(4)
            placement[:3, :3] = to_numpy64(r)
            placement[:3, 3] = to_numpy64(t)
            return to_numpy64(self.rotvecs()[0]), to_numpy64(self.phenotypes()[0]), placement
