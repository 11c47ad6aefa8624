# SPDX-License-Identifier: GPL-3.0-or-later
"""The fit's terms for the people of a group at once: keypoints, priors, surface and silhouette.

An evaluation is bound by its number of small tensor operations, not their size, and each
person's terms used to be a hundred-odd operations of their own (two people: 40 % more time per
evaluation than one). Here every operation covers all the people: their observations are
stacked once per stage, padded where people differ (points, pixels to cover; the pads weigh
nothing), and the round's correspondences once per round. Each person's loss is its own row:
person i's loss depends on person i's variables only (each keeps its own optimiser).

Free of host reads and data-dependent shapes, like the body pass it follows (group._body_pass).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .body_model import PHENOTYPE_NAMES, rotvec_to_matrix
from .bones import WORLD_BONES
from .correspondences import JOINT_NAMES
from .limits import hinge_penalty
from . import pose_prior
from .procrustes import special_procrustes
from .tensor_ops import charbonnier, keypoint_cost, pinhole, rescaled_depth

# The phenotypes held nearer the average than the others where the depth is a guess (FitSettings
# "girth_prior"): the girth (muscle, weight), which a clothed outline overstates, and the body's
# proportions, which keypoints whose joints are not anny's pushed to either end (16 of 41 real
# bodies under 0.1 or over 0.9: docs/body_fit.md "Proportions held too").
HELD_PHENOTYPES = ("muscle", "weight", "proportions")
_HELD = np.array([n in HELD_PHENOTYPES for n in PHENOTYPE_NAMES], np.float64)


@dataclass
class Variables:
    """The people's variables stacked (differentiably) for one evaluation."""

    pose_free: torch.Tensor  # [P,F,3]
    pose_fingers: torch.Tensor  # [P,Fi,3]
    shape_logit: torch.Tensor  # [P,6]
    phenotypes: torch.Tensor  # [P,6]
    rotvecs: torch.Tensor  # [P,B,3]
    rotation: torch.Tensor  # [P,3,3] model -> camera
    translation: torch.Tensor  # [P,3]
    depth_scale: torch.Tensor | None  # [P] (relative depth only)
    depth_shift: torch.Tensor | None  # [P]

    def to_camera(self, x: torch.Tensor) -> torch.Tensor:
        """[P,N,3] model frame -> camera frame."""
        return x @ self.rotation.transpose(1, 2) + self.translation[:, None]


WORLD_TURN = 10.0  # degrees: the most the backend's 3D pose is turned onto the body's
_WORLD_A = [JOINT_NAMES.index(a) for a, _ in WORLD_BONES]
_WORLD_B = [JOINT_NAMES.index(b) for _, b in WORLD_BONES]


def world_directions(obs: list) -> tuple[np.ndarray, np.ndarray]:
    """Per person, the unit direction of each WORLD_BONES bone in their backend 3D pose [P,S,3]
    and its weight [P,S] (both ends' weights; 0 where either end or the whole pose is missing)."""
    dirs = np.zeros((len(obs), len(WORLD_BONES), 3))
    weights = np.zeros((len(obs), len(WORLD_BONES)))
    for i, o in enumerate(obs):
        if o.world is None:
            continue
        d = o.world[_WORLD_B] - o.world[_WORLD_A]
        n = np.linalg.norm(d, axis=1)
        ok = np.isfinite(n) & (n > 1e-3)
        dirs[i, ok] = d[ok] / n[ok, None]
        weights[i, ok] = (o.world_weights[_WORLD_A] * o.world_weights[_WORLD_B])[ok]
    return dirs, weights


# A bone shorter than this on the image (px) gives no plane to lay its 3D direction in.
IN_PLANE_MIN_PX = 4.0


def bone_planes(obs: list) -> tuple[np.ndarray, np.ndarray]:
    """Per person and WORLD_BONES bone, the unit normal of the plane through the camera centre
    and both ends' keypoints [P,S,3] (every 3D bone that projects onto the keypoints lies in it),
    and whether there is one [P,S] (both ends seen, the bone long enough on the image)."""
    normals = np.zeros((len(obs), len(WORLD_BONES), 3))
    valid = np.zeros((len(obs), len(WORLD_BONES)), bool)
    for i, o in enumerate(obs):
        k = np.asarray(o.intrinsics, np.float64)
        kp = np.asarray(o.keypoints, np.float64)
        rays = np.stack([(kp[:, 0] - k[0, 2]) / k[0, 0], (kp[:, 1] - k[1, 2]) / k[1, 1], np.ones(len(kp))], 1)
        n = np.cross(rays[_WORLD_A], rays[_WORLD_B])
        norm = np.linalg.norm(n, axis=1)
        long = np.linalg.norm(kp[_WORLD_B] - kp[_WORLD_A], axis=1) > IN_PLANE_MIN_PX
        w = np.asarray(o.weights)
        ok = (w[_WORLD_A] > 0) & (w[_WORLD_B] > 0) & long & (norm > 1e-9)
        normals[i, ok] = n[ok] / norm[ok, None]
        valid[i] = ok
    return normals, valid


def lay_in_planes(dirs: torch.Tensor, normals: torch.Tensor, planes: torch.Tensor):
    """Unit directions [...,3] laid into the planes of unit ``normals`` where ``planes`` [...]:
    (the directions, how well each agreed: the cosine of the turn, 1 where there is no plane)."""
    lean = dirs - (dirs * normals).sum(-1, keepdim=True) * normals
    agree = lean.norm(dim=-1)
    laid = torch.where(planes[..., None], lean / agree[..., None].clamp_min(1e-6), dirs)
    return laid, torch.where(planes, agree, torch.ones_like(agree))


def _pad(arrays: list, value=0.0, dtype=None, device=None, bucket: int = 1) -> torch.Tensor:
    """Stack arrays that differ in their first dimension, padded with ``value`` to the longest
    (rounded up to a multiple of ``bucket``: graph_solver.py reuses a captured step for every
    photo whose padded sizes match)."""
    n = max((len(a) for a in arrays), default=0)
    n = -(-n // bucket) * bucket
    first = np.asarray(arrays[0])
    out = np.full((len(arrays), n, *first.shape[1:]), value, dtype=first.dtype)
    for i, a in enumerate(arrays):
        out[i, :len(a)] = a
    return torch.as_tensor(out, dtype=dtype, device=device)


def _batch(leaves: list) -> torch.Tensor:
    """The people's variables as one batch. Not torch.stack: compiled (torch 2.13, inductor on
    the CPU), a stack of one person's leaf in this pass had the backward write the gradient
    over the leaf itself (tested: test_fit_compile)."""
    return torch.cat([v[None] for v in leaves])


class GroupTerms:
    """The terms of ``problems`` (problem.PersonProblem, people of one photo), batched. Made
    once their starts are set (the placements' closed-form parts are read here)."""

    def __init__(self, problems: list, bucket: int = 1):
        self.problems = problems
        p0 = problems[0]
        f, dt, dev = p0.f, p0.dt, p0.dev
        self.f, self.wt, self.dt, self.dev = f, p0.wt, dt, dev
        obs = [p.obs for p in problems]
        real = lambda a: torch.as_tensor(np.asarray(a), dtype=dt, device=dev)  # noqa: E731
        each = lambda name: np.stack([getattr(o, name) for o in obs])  # noqa: E731
        stack = lambda name: torch.stack([getattr(p, name) for p in problems])  # noqa: E731
        self.pose, self.r0, self.t0 = torch.cat([p.pose for p in problems]), stack("r0"), stack("t0")
        self.t_unit = real([p.t_unit for p in problems])[:, None]  # metres per unit of root_t
        k = real(each("intrinsics"))
        self.fx, self.fy = k[:, 0, 0, None, None], k[:, 1, 1, None, None]
        self.cx, self.cy = k[:, 0, 2, None, None], k[:, 1, 2, None, None]
        self.kp, self.w = real(each("keypoints")), real(each("weights"))
        lifted = each("lifted")
        self.lifted, self.radius = real(np.nan_to_num(lifted, nan=0.0)), real(each("joint_radius"))
        self.two_sided = torch.as_tensor(each("lifted_two_sided"), device=dev)
        # Keypoints with a lifted depth (none without depth: every lift is NaN there).
        self.lift_m = real(np.isfinite(lifted)) * self.w
        self.scale = real([o.scale_px for o in obs])[:, None]
        # With the backend's own 3D pose (the offline backend) the dense cues are made from that
        # same pose (pseudo-depth), so the keypoints are the best-measured cue there: weighed
        # up, the bodies' 2D error on real photos fell 6.5 -> 6.1 % (docs/body_fit.md).
        # In the last stage (solver.FitSettings.polish_steps) they weigh more again.
        self.keypoint_w = real([self.wt.get("keypoints_polish" if p.polishing else "keypoints_with_world", 1.0)
                                if p.obs.world is not None else 1.0 for p in problems])
        # The backend's own 3D pose, as bone directions (none from Sapiens: its pointmap is 3D).
        self.any_world = any(o.world is not None for o in obs) and self.wt.get("world", 0) > 0
        if self.any_world:
            dirs, wts = world_directions(obs)
            self.world_dir, self.world_w = real(dirs), real(wts)
            self.world_a = torch.as_tensor(_WORLD_A, device=dev)
            self.world_b = torch.as_tensor(_WORLD_B, device=dev)
            # Turned only with metric depth, which pins the body's own orientation; without it
            # the absolute directions are what says which way the body faces (turned there, a
            # ground-truth body without depth, given its true 3D pose, fitted 16.5 cm off).
            self.world_turns = torch.as_tensor([o.metric for o in obs], device=dev)
            # The backend's 3D pose and its 2D keypoints come from different heads and disagree
            # on the image plane; the keypoints are the better there, the 3D pose is the only
            # word on depth. So each bone's direction is laid into the plane its keypoints
            # allow, keeping how far it leans out of the image, and weighed by how well the two
            # agree (the cosine of the turn): the term no longer pulls the joints off their
            # keypoints.
            normals, planes = bone_planes(obs)
            self.world_normals = real(normals)
            self.world_planes = torch.as_tensor(planes, device=dev) & (self.wt.get("world_in_plane", 0.0) > 0)
        self.prior, self.finger_prior, self.twist_prior = stack("prior"), stack("finger_prior"), stack("twist_prior")
        # The learned pose prior (pose_prior.py), per limb: on a limb nothing shows, at its own
        # weight; on a seen one, in proportion to the doubt of its keypoints (1 - their scores),
        # and only where the depth is a guess: a person with the backend's own 3D pose, i.e. the
        # offline backend, whose pseudo-depth comes from the same landmarks. Measured depth
        # (Sapiens2's pointmap, the ground truth) places a seen limb better than the prior does.
        guessed = real([o.world is not None for o in obs])
        self.pose_prior_w = pose_prior.limb_weights(self.prior, self.w, guessed * self.wt.get("pose_prior", 0.0),
                                                    self.wt.get("pose_prior_unseen", 0.0))
        self.any_pose_prior = bool((self.pose_prior_w > 0).any())
        # The girth (muscle, weight) and proportions (HELD_PHENOTYPES) where the dense cues are
        # the clothed outline's guess (the offline backend, as above): held nearer the average.
        # There, loose clothing read as the body made bodies heavy (19 of 41 real people at
        # weight > 0.8) and one man's two frames fitted at weight 0.45 and 0.97 (docs/body_fit.md,
        # "Body shapes on real photos"), and the proportions went to either end.
        self.girth_w = guessed[:, None] * real(_HELD)[None] * self.wt.get("girth_prior", 0.0)  # [P,6]
        if self.any_pose_prior:
            self.pose_model = pose_prior.load(dt, dev)
        # Depth: relative depth solves a scale and shift per person (people without it would
        # hold 1 and 0, which leave its terms exact).
        self.any_depth = any(o.has_depth for o in obs)
        self.relative = any(o.has_depth and not o.metric for o in obs)
        # Observed surface points (none without depth), padded: a pad is never matched.
        self.points_n = [len(o.points) for o in obs]
        self.any_points = max(self.points_n) > 0
        if self.any_points:
            self.points = _pad([o.points for o in obs], 1.0, dt, dev, bucket)  # z = 1: no division by zero
            self.covering = _pad([o.covering for o in obs], False, device=dev, bucket=bucket)
        # Silhouette: the distance fields of one photo's people share its grid.
        sizes = {o.allowed_dt.shape for o in obs}
        if len(sizes) != 1:
            raise ValueError(f"people fitted together must come from one photo (grids {sorted(sizes)})")
        self.allowed_dt = real(each("allowed_dt"))[:, None]  # [P,1,h,w]
        self.part_dt = real(each("part_dt"))  # [P,C,h,w]
        self.size = real([[o.size[1], o.size[0]] for o in obs])[:, None]  # [P,1,2]: w, h
        self.scale_grid = self.scale * real([o.grid_scale for o in obs])[:, None]  # person size, grid px
        self.cover_px = _pad([o.cover_pixels for o in obs], 0.0, dt, dev, bucket)
        self.cover_real = _pad([o.cover_weights for o in obs], 0.0, dt, dev, bucket)
        self.sample_class = f._sample_class

    # --- variables --------------------------------------------------------------------------
    def variables(self) -> Variables:
        ps = self.problems
        relative = self.relative
        return self.variables_of(
            _batch([p.pose_free for p in ps]), _batch([p.pose_fingers for p in ps]),
            _batch([p.shape_logit[0] for p in ps]), _batch([p.root_rot for p in ps]), _batch([p.root_t for p in ps]),
            _batch([p.log_depth_scale for p in ps]) if relative else None,
            _batch([p.depth_shift for p in ps]) if relative else None)

    def variables_of(self, free, fingers, logit, root_rot, root_t, log_depth_scale, depth_shift) -> Variables:
        """The Variables of the people's stacked variables [P,...] (from the problems' leaves,
        or graph_solver.py's flat rows)."""
        f = self.f
        rot = self.pose.clone()
        rot[:, f._free] = free
        if f.settings.fingers:
            rot[:, f._fingers] = fingers
        r = rotvec_to_matrix(root_rot) @ self.r0
        t = self.t0 + root_t * self.t_unit
        scale = torch.exp(log_depth_scale) if self.relative else None
        shift = depth_shift if self.relative else None
        return Variables(free, fingers, logit, torch.sigmoid(logit * f.shape_scale), rot, r, t, scale, shift)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return pinhole(x, self.fx, self.fy, self.cx, self.cy)

    # --- terms ------------------------------------------------------------------------------
    def keypoints(self, joints: torch.Tensor, v: Variables, lift: float = 1.0) -> torch.Tensor:
        """[P]: robust, score-weighted reprojection (in % of each person's size), and where
        depth is known the joints at their lifted depth (one-sided under clothing)."""
        cam = v.to_camera(joints)
        loss = keypoint_cost(self.project(cam), self.kp, self.w, self.scale).sum(-1) / self.w.sum(-1).clamp_min(1e-6)
        loss = loss * self.keypoint_w
        if self.any_depth:
            surface = self.lifted
            if self.relative:
                surface = surface * v.depth_scale[:, None] + v.depth_shift[:, None]
            gap = (cam[..., 2] - self.radius - surface) * 100.0  # cm; > 0 behind the seen surface
            two = torch.where(self.two_sided, charbonnier(gap, 2.0), torch.relu(-gap) ** 2 / 4.0)
            m = self.lift_m
            loss = loss + lift * self.wt["lift"] * (m * two).sum(-1) / m.sum(-1).clamp_min(1e-6)
        if self.any_world:
            loss = loss + self.wt["world"] * self.world(cam)
        return loss

    def world(self, cam: torch.Tensor) -> torch.Tensor:
        """[P]: the bones' directions against the backend's own 3D pose (robust, in cm of chord
        per metre of bone: 20 degrees off is ~35): where the keypoints say where a limb ends on
        the image, this says whether it points towards the camera or away."""
        d = cam[:, self.world_b] - cam[:, self.world_a]
        unit = d / d.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        # The backend's pose turned onto the body's as a whole first (its frame is only roughly
        # the camera's), by at most WORLD_TURN: beyond that it is the body that is turned wrong.
        # Real-photo benchmark, 3D frames' PA-MPJPE mean: unturned 198 mm at weight 0.5, 192 at
        # 2; turned (at most 30 degrees) 185 at 1; at most 10 degrees 176 at 1.
        cross = (self.world_w[..., None] * unit.detach()).transpose(1, 2) @ self.world_dir  # [P,3,3]
        turn = special_procrustes(cross, sync_free=True).detach()
        small = ((turn.diagonal(dim1=1, dim2=2).sum(-1) - 1) / 2 > np.cos(np.radians(WORLD_TURN))) & self.world_turns
        turn = torch.where(small[:, None, None], turn, torch.eye(3, dtype=turn.dtype, device=turn.device))
        target, agree = lay_in_planes(self.world_dir @ turn.transpose(1, 2), self.world_normals, self.world_planes)
        w = self.world_w * agree
        err = charbonnier((unit - target).norm(dim=-1) * 100.0, 1.0)
        return (w * err).sum(-1) / self.world_w.sum(-1).clamp_min(1e-6)

    def priors(self, v: Variables, joints: torch.Tensor | None = None) -> torch.Tensor:
        """[P]: rotations towards rest (hard where nothing shows a bone), the limbs' poses
        likely in real motion (of ``joints`` [P,J,3], the model frame's), twist and hinge
        limits, shapes near the average, age held past a young adult."""
        f, free = self.f, v.pose_free
        loss = (self.prior[..., None] * free ** 2).sum((1, 2)) * 0.5 * self.wt["prior"]
        if joints is not None and self.any_pose_prior:
            loss = loss + (self.pose_prior_w * self.pose_model.energy(joints)).sum(-1)
        # Twist (about each bone's own Y) is rare, and one keypoint per bone does not see it:
        # held harder (but a forearm whose hand is seen turns freely: problem.TWIST_SEEN).
        loss = loss + (self.twist_prior * free[..., 1] ** 2).sum(-1)
        # Knees and elbows do not bend backwards (beyond a little slack).
        loss = loss + self.wt["hinge"] * hinge_penalty(free, f._hinges, f._hinge_floors)
        if f.settings.fingers:
            loss = loss + 0.5 * (self.finger_prior[..., None] * v.pose_fingers ** 2).sum((1, 2))
        shape = v.shape_logit * f.shape_scale  # the phenotypes' logits
        loss = loss + 0.02 * (shape ** 2).sum(-1) + (self.girth_w * shape ** 2).sum(-1)
        # Photos show children and adults: past a young adult, "age" mostly bends the rest
        # posture, which the pose can mimic; keep it from trading off against height.
        return loss + 50.0 * torch.relu(v.phenotypes[:, 1] - 0.55) ** 2

    def new_round(self) -> None:
        """Stack the round's correspondences (each problem's, picked by
        PersonProblem.pick_correspondences): normals, surface matches, silhouette matches."""
        ps = self.problems
        self.normals = torch.stack([p._normals for p in ps])  # [P,S,3]
        if self.any_points:
            n = self.points.shape[1]
            nn = torch.zeros((len(ps), n), dtype=torch.long, device=self.dev)
            matched = torch.zeros((len(ps), n), dtype=self.dt, device=self.dev)
            offset = torch.zeros((len(ps), n, 3), dtype=self.dt, device=self.dev)
            point_normals = torch.zeros_like(offset)
            for i, (p, k) in enumerate(zip(ps, self.points_n)):
                if k:
                    nn[i, :k], matched[i, :k] = p._nn, p._matched
                    offset[i, :k], point_normals[i, :k] = p._offset, p._point_normals
            self.nn, self.matched, self.offset, self.point_normals = nn, matched, offset, point_normals
            self.matched_n = matched.sum(-1).clamp_min(1.0)
        m = self.cover_px.shape[1]
        cover_nn = torch.zeros((len(ps), m), dtype=torch.long, device=self.dev)
        cover_w = self.cover_real.clone()
        for i, p in enumerate(ps):
            if p._cover_nn is None:  # no body point faces the camera: nothing to cover with
                cover_w[i] = 0.0
            else:
                cover_nn[i, :len(p._cover_nn)] = p._cover_nn
        # contiguous (not an expanded view): graph_solver.py writes a new round into it in place
        self.cover_nn, self.cover_w = cover_nn[..., None].expand(-1, -1, 2).contiguous(), cover_w
        self.cover_w_sum = cover_w.sum(-1).clamp_min(1e-12)

    def surface(self, sample: torch.Tensor, v: Variables) -> torch.Tensor:
        """[P]: ``sample`` [P,S,3] the posed mesh subsample (model frame). Skin points on the
        surface, covering (clothing, hair) on or outside it; the body inside the silhouette,
        its facing points on their own parts, every pixel of the person near a facing point."""
        cam = v.to_camera(sample)
        normals = self.normals
        facing = ((normals * cam.detach()).sum(-1) < 0).to(self.dt)  # towards the camera
        loss = torch.zeros(cam.shape[0], dtype=self.dt, device=self.dev)
        if self.any_points:
            pts = self.points
            if self.relative:
                pts = rescaled_depth(pts, v.depth_scale[:, None], v.depth_shift[:, None])
            # each point's match on the surface, carried by its subsample vertex (pick_correspondences)
            on = cam.gather(1, self.nn[..., None].expand(-1, -1, 3)) + self.offset
            n = self.point_normals
            signed = ((pts - on) * n).sum(-1) * 100.0  # cm, > 0 outside the body
            dist = (pts - on).norm(dim=-1) * 100.0
            skin = charbonnier(signed, 1.0) + 0.02 * charbonnier(dist, 1.0)
            cover = torch.relu(-signed) ** 2 + 0.05 * charbonnier(signed, 1.0)
            term = torch.where(self.covering, cover, skin) * self.matched
            loss = loss + self.wt["surface"] * term.sum(-1) / self.matched_n
        px = self.project(cam)
        grid = (px / self.size * 2 - 1)[:, None].clamp(-1.5, 1.5)  # [P,1,S,2]
        inside = torch.nn.functional.grid_sample(self.allowed_dt, grid, align_corners=False)[:, 0, 0]
        loss = loss + self.wt["inside"] * (inside / self.scale_grid * 100.0).pow(2).mean(-1)
        pd = torch.nn.functional.grid_sample(self.part_dt, grid, align_corners=False)[:, :, 0]  # [P,C,S]
        own = pd.gather(1, self.sample_class.expand(len(pd), 1, -1))[:, 0]
        # Mean over the facing points, without selecting them (no data-dependent shapes).
        own_cm = charbonnier(own / self.scale_grid * 100.0, 1.0) * facing
        loss = loss + self.wt["part"] * own_cm.sum(-1) / facing.sum(-1).clamp_min(1)
        d = (self.cover_px - px.gather(1, self.cover_nn)).norm(dim=-1) / self.scale * 100.0
        return loss + self.wt["cover"] * (self.cover_w * charbonnier(d, 1.0)).sum(-1) / self.cover_w_sum
