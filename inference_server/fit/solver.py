# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit the body to one person's observations: placement, pose and shape.

The method, and why it is fast:
1. **Closed-form start**: the body's size is picked (a child to a tall adult) by the lengths of
   the keypoints lifted by the pointmap; its torso joints are aligned (Kabsch) with them (or,
   without metric depth, with the keypoints back-projected at the distance their pixel size
   implies); then each arm and leg is turned, upper bone then lower, onto its keypoints' rays
   (a joint without its keypoint towards its part's seen skin). No iterations are spent
   finding the person, and a bent limb does not have to be unfolded by the solver.
2. **Skeleton stage**: pose, shape and placement against the keypoints (robust, score-weighted
   reprojection + lifted depth), on the skeleton-only pass (bones + the 2,360 vertices the
   pruned joint regressor reads, not the 13,718 of the mesh).
3. **Surface stage**: two rounds adding the dense cues: observed skin points on the body's
   surface, covering (clothing, hair) outside or on it, never inside; the body's parts inside
   their segmentation parts and the silhouette covered. Correspondences are nearest points of
   the parts the point's label allows, refreshed every round (ICP), on a fixed 4,000-vertex
   subsample of the mesh; then a round on the shape and placement alone.
Priors throughout: rotations pulled towards the rest pose (hard for bones no keypoint sees, so
an unseen limb stands neutral), hinge limits for knees and elbows, twist limits, phenotypes
kept inside anny's [0, 1] by a sigmoid.

``plain=True`` is the benchmark's baseline: the same terms, all at once, from the rest pose
facing the camera, on the full mesh, plain Adam.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from . import start
from .bones import (BODY_BONES, BONE_EVIDENCE, BONE_PART, FINGER_BONES, HINGES, LIMB_CHAINS,
                    START_SIZES)
from .body_model import BodyModel, rotvec_to_matrix
from .correspondences import JOINT_NAMES
from .group import Group, compiled_for
from .observations import PersonObservation, class_index_of_vertices
from .tensor_ops import charbonnier, vertex_normals


def _np(x: torch.Tensor) -> np.ndarray:
    """float64 numpy copy of a tensor on any device (the closed-form steps are numpy)."""
    return x.detach().double().cpu().numpy()


@dataclass
class FitSettings:
    # L-BFGS iterations of the skeleton stage, shape free from the start (holding the shape
    # while the pose settled was cheaper but got stuck: worse joints and height on the ground truth)
    skeleton_steps: int = 45
    # Without metric depth the limb start has no depth to choose a fold by: the skeleton stage
    # has more to do (at 45, relative depth's joints max went 3.9 -> 4.8 cm).
    skeleton_steps_without_metric: int = 60
    # L-BFGS iterations per surface round, correspondences refreshed between rounds: 2 x 20 is
    # 0.1 s more than 3 x 10 and its joints were 0.1-0.5 cm nearer on the ground truth (the
    # quasi-Newton history is worth more than a third refresh)
    surface_steps: int = 20
    surface_rounds: int = 2
    shape_steps: int = 10  # L-BFGS iterations of the last round, on the shape and placement alone
    refresh_every: int = 5  # plain baseline: surface correspondences refreshed every N steps
    mesh_samples: int = 4000
    plain: bool = False  # the baseline: no closed-form start, no stages, full mesh, plain Adam
    plain_steps: int = 400
    target_joint_px: float | None = None  # stop (plain) once the mean reprojection error is below
    # plain: called every 5 steps as monitor(person_id, steps, seconds, camera_joints [J,3],
    # reprojection_px); the run stops when it returns True. ``seconds``: the fit's time so far,
    # the monitor's own left out (the benchmark stops the baseline on the 3D joint error
    # against a scene's truth).
    plain_monitor: object = None
    fingers: bool = True
    # People fitted together (one batched body pass per evaluation; group.py): a photo's people
    # in groups of at most this many.
    group_size: int = 4
    # torch threads while fitting: the fit's tensors are small, so extra threads buy little and
    # on a busy machine (a batch, the test suite, Blender) spinning threads made it 4x slower.
    threads: int | None = 1
    # Term weights (see _Problem): keypoints are 1.
    # prior_seen: the pull to rest of a limb that a keypoint or its part shows. Light: a bent knee
    # or elbow pulled straight while its end is held by the keypoint asks for shorter bones, and
    # the shape gave them (fitted bodies came out 2-5 cm short). surface: the observed points are
    # the strongest dense cue (at 0.5 noisy keypoints pulled knees 5-9 cm off; at 4 about 2).
    weights: dict = field(default_factory=lambda: {
        "lift": 0.5, "lift_dense": 1.0, "prior": 1.0, "prior_seen": 0.03, "hinge": 1.0, "surface": 4.0,
        "inside": 0.5, "part": 0.2, "cover": 0.3})
    dtype: torch.dtype = torch.float32
    # torch.compile the evaluation (group._body_pass): on this CPU a surface evaluation takes
    # 2.8 instead of 6.2 ms, but the first fit of a process pays the compiling (about 2 min with
    # a cold cache, 10 s warm), so it pays for batches, not for one photo (docs/body_fit.md).
    compile: bool = False


@dataclass
class PersonFit:
    person_id: int
    rotvecs: np.ndarray  # [B,3]
    phenotypes: np.ndarray  # [6]
    placement: np.ndarray  # [4,4]
    joints_estimated: np.ndarray  # [J] bool
    report: dict = field(default_factory=dict)


class BodyFitter:
    def __init__(self, body: BodyModel, settings: FitSettings | None = None):
        self.body = body
        self.settings = settings or FitSettings()
        names = body.bone_names
        self.device = dev = body.device  # the fit runs where the body model lives (cpu or cuda)
        index = lambda bones: torch.tensor([body.bone_index[b] for b in bones], dtype=torch.long, device=dev)  # noqa: E731
        self._free, self._fingers, self._hinges = index(BODY_BONES), index(FINGER_BONES), index(HINGES)
        self.nbones = len(names)
        t = body.template()
        self._faces = torch.as_tensor(t["faces"].astype(np.int64), device=dev)
        cls = class_index_of_vertices(t["vertex_parts"], t["part_names"])
        nv = len(cls)
        step = max(1, nv // self.settings.mesh_samples)
        self._sample = torch.arange(0, nv, step, device=dev)
        self._sample_class = torch.as_tensor(cls, device=dev)[self._sample]
        self._vertex_sample = body.vertex_sample(self._sample)
        self.shape_scale = self._shape_preconditioner()
        self.neutral = self._neutral_pose()

    def _neutral_pose(self) -> torch.Tensor:
        """anny's own neutral standing posture (its reference pose: identity in its 'local-ref'
        parameterisation) as rotations from the rest pose [B,3]. The bones the fit does not turn
        (pelvis, twist segments, metacarpals, toes) keep it: at the rest pose instead, the hips
        and legs of a standing person were a few millimetres to centimetres off."""
        import roma

        with torch.no_grad():
            out = self.body.anny()
            w, p = out["bone_poses"][0], out["rest_bone_poses"][0]
            par = self.body.parents
            rot = torch.zeros((len(par), 3), dtype=self.settings.dtype, device=self.device)
            for c in range(1, len(par)):
                local = torch.linalg.inv(torch.linalg.inv(p[par[c]]) @ p[c]) @ torch.linalg.inv(w[par[c]]) @ w[c]
                rot[c] = roma.rotmat_to_rotvec(local[:3, :3].to(rot.dtype))
        return rot

    def _shape_preconditioner(self) -> torch.Tensor:
        """Per phenotype, a logit scale that makes a unit step move the body about as much as a
        unit step of the strongest one (age moves it 100x more than weight: without this the
        solver never touches the weak ones). A diagonal preconditioner, measured once."""
        full = lambda: torch.full((1, 6), 0.5, dtype=self.body.dtype, device=self.device)  # noqa: E731
        with torch.no_grad():
            base = self.body.rest_state(full(), True).vertices
            rms = []
            for i in range(6):
                ph = full()
                ph[0, i] = 0.6
                v = self.body.rest_state(ph, True).vertices
                rms.append(float((v - base).pow(2).sum(-1).mean().sqrt()))
        rms = np.maximum(np.array(rms), 1e-9)
        return torch.tensor(np.clip(rms.max() / rms, 1.0, 20.0), dtype=self.settings.dtype, device=self.device)

    # --- public --------------------------------------------------------------------------
    def fit(self, obs: PersonObservation, cancel=None) -> PersonFit:
        return self.fit_group([obs], cancel)[0]

    def fit_group(self, observations: list[PersonObservation], cancel=None) -> list[PersonFit]:
        """Fit people together (group.Group: each its own optimiser, one batched body pass per
        evaluation); each report's ``seconds`` is the person's share of the group's time."""
        start = time.perf_counter()
        s = self.settings
        probs = [_Problem(self, obs) for obs in observations]
        if s.plain:  # the baseline: one person at a time, as the benchmark times it
            steps = []
            for prob in probs:
                started = time.perf_counter()  # each person's own time, as the monitor reads it
                prob.init_plain()
                steps.append(prob.run_plain(s.plain_steps, s.target_joint_px, cancel, s.plain_monitor, started))
            stages = [{"plain": n} for n in steps]
        else:
            group = Group(probs)
            for prob in probs:
                prob.init_closed_form()
            metric = all(obs.metric for obs in observations)
            n1 = group.run_lbfgs(s.skeleton_steps if metric else s.skeleton_steps_without_metric,
                                 dense=False, cancel=cancel)
            n2 = group.run_lbfgs(s.surface_steps, dense=True, rounds=s.surface_rounds, shape=False,
                                 cancel=cancel)
            # The body's size and girth only the surface tells well: a round on the shape and
            # placement alone, where those small gradients are not drowned by the pose's.
            n3 = group.run_lbfgs(s.shape_steps, dense=True, cancel=cancel, shape_round=True) if s.shape_steps \
                else [0] * len(probs)
            stages = [{"skeleton": a, "surface": b + c} for a, b, c in zip(n1, n2, n3)]
        seconds = (time.perf_counter() - start) / len(probs)
        return [self._person_fit(prob, steps, seconds) for prob, steps in zip(probs, stages)]

    def _person_fit(self, prob: "_Problem", stages: dict, seconds: float) -> PersonFit:
        obs = prob.obs
        rot, phen, placement = prob.result()
        err = prob.joint_error_px()
        report = {"seconds": round(seconds, 3), "steps": dict(stages),
                  "reprojection_px": round(err, 2),
                  "reprojection_pct": round(100.0 * err / max(obs.scale_px, 1.0), 2),  # of the person's size
                  "depth": "metric" if obs.metric else
                  ("relative (scale solved)" if obs.has_depth else "none (keypoints and masks)"),
                  "depth_scale": round(float(prob.depth_scale.detach()), 4) if obs.has_depth and not obs.metric else None,
                  "keypoints_seen": int(obs.seen.sum())}
        if obs.has_depth:
            report["surface_residual_m"] = round(prob.surface_residual(), 4)
        return PersonFit(obs.person_id, rot, phen, placement, ~obs.seen.copy(), report)


class _Problem:
    """One person's variables and terms."""

    def __init__(self, fitter: BodyFitter, obs: PersonObservation):
        self.f, self.obs = fitter, obs
        self.wt = fitter.settings.weights
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
        self.r0 = torch.eye(3, dtype=dt, device=self.dev)
        self.t0 = torch.zeros(3, dtype=dt, device=self.dev)
        self.log_depth_scale, self.depth_shift = var(), var()
        self.k, self.kp, self.w = real(obs.intrinsics), real(obs.keypoints), real(obs.weights)
        self.lifted = real(np.nan_to_num(obs.lifted, nan=0.0))
        self.has_lift = flag(np.isfinite(obs.lifted) & (obs.weights > 0))
        self.two_sided = flag(obs.lifted_two_sided)
        self.radius = real(obs.joint_radius)
        self.points = real(obs.points)
        self.covering = flag(obs.covering)
        self.point_parts = flag(obs.point_parts)
        self._matched = None
        self.allowed_dt = real(obs.allowed_dt)[None, None]
        self.part_dt = real(obs.part_dt)[None]
        self.cover_px, self.cover_w = real(obs.cover_pixels), real(obs.cover_weights)
        self.scale = max(obs.scale_px, 1.0)
        self._nn = None
        self._cover_nn = None  # per silhouette pixel, the nearest facing sample vertex
        self._step = 0
        self._normals = None
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
        hands = {s: sum(1 for n in seen if n.startswith(s) and ("finger" in n or "thumb" in n))
                 for s in ("left", "right")}
        self.finger_prior = real([0.3 if hands["left" if b.endswith(".L") else "right"] >= 6 else 30.0
                                  for b in FINGER_BONES])

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
        return rotvec_to_matrix(self.root_rot) @ self.r0, self.t0 + self.root_t

    def to_camera(self, x: torch.Tensor) -> torch.Tensor:
        r, t = self.placement()
        return x @ r.T + t

    def project(self, x: torch.Tensor) -> torch.Tensor:
        z = x[..., 2:3].clamp_min(0.05)
        return torch.cat([self.k[0, 0] * x[..., :1] / z + self.k[0, 2],
                          self.k[1, 1] * x[..., 1:2] / z + self.k[1, 2]], -1)

    # --- starts ------------------------------------------------------------------------------
    def _rest_joints(self) -> np.ndarray:
        with torch.no_grad():
            return _np(self.f.body.skeleton(self.phenotypes(), self.rotvecs()).joints[0])

    def init_size(self) -> None:
        """Start at the person's size: of bodies from a child to a tall adult (anny's age, then
        height phenotypes), the one whose bone lengths match the lifted keypoints (metric depth)."""
        if not self.obs.metric:
            return
        sizes = np.full((len(START_SIZES), 6), 0.5)
        sizes[:, 1] = [a for a, _h in START_SIZES]
        sizes[:, 4] = [h for _a, h in START_SIZES]
        ph = torch.as_tensor(sizes, dtype=self.dt, device=self.dev)
        with torch.no_grad():
            joints = self.f.body.skeleton(ph, self.rotvecs().expand(len(ph), -1, -1)).joints
        best = start.best_size(self.obs, _np(joints), START_SIZES.index((0.5, 0.5)))
        if best is not None:
            logit = torch.logit(ph[best:best + 1]) / self.f.shape_scale
            self.shape_logit.data.copy_(logit)

    def init_closed_form(self) -> None:
        self.init_size()
        r, t = start.closed_form(self.obs, self._rest_joints())
        self._set_placement(r, t)
        self.init_limbs()
        if self.obs.has_depth and not self.obs.metric:
            self._init_depth_scale()

    def init_limbs(self) -> None:
        """Arms and legs turned in closed form, upper bone then lower, so that each seen elbow,
        wrist, knee and ankle lies on its keypoint's ray (at the depth the pointmap gives where it
        gives one): the skeleton stage then starts with the limbs roughly in place, not from a
        standing pose that a bent arm is many iterations (and sometimes a wrong fold) away from."""
        import roma

        names = {n: j for j, n in enumerate(JOINT_NAMES)}
        free = {int(b): k for k, b in enumerate(self.f._free)}
        for side, s in (("left", "L"), ("right", "R")):
            for stem, far, after in LIMB_CHAINS:
                bone = self.f.body.bone_index[f"{stem}.{s}"]
                joint = names[f"{side}_{far}"]
                with torch.no_grad():
                    r, t = self.placement()
                    sk = self.f.body.skeleton(self.phenotypes(), self.rotvecs())
                    head = _np(sk.bone_poses[0, bone, :3, 3] @ r.T + t)
                    joints = _np(self.to_camera(sk.joints[0]))
                    child = joints[joint]
                    end = None
                    if after:
                        nxt = names[f"{side}_{after}"]
                        end = (nxt, float(np.linalg.norm(joints[nxt] - child)))
                    forward = _np(r[:, 1]) * -1.0 if stem == "upperleg01" else None  # anny faces -Y
                    target = start.limb_target(self.obs, joint, head, float(np.linalg.norm(child - head)), child,
                                               end, forward)
                    if target is None:
                        continue
                    r64 = _np(r)
                    turn = r64.T @ start.rotation_between(child - head, target - head) @ r64  # model frame
                    world = _np(sk.bone_poses[0, bone, :3, :3])
                    local = _np(rotvec_to_matrix(self.pose_free[free[bone]].detach().double()))
                    parent_part = world @ local.T
                    new = parent_part.T @ turn @ world
                    self.pose_free[free[bone]] = roma.rotmat_to_rotvec(torch.as_tensor(new)).to(self.dev, self.dt)

    def _init_depth_scale(self) -> None:
        """Relative depth: the scale that puts the observed torso at the body's torso depth."""
        obs = self.obs
        sel = [j for j in range(len(JOINT_NAMES)) if obs.weights[j] > 0 and np.isfinite(obs.lifted[j])]
        if not sel:
            return
        with torch.no_grad():
            joints = self.to_camera(self.f.body.skeleton(self.phenotypes(), self.rotvecs()).joints[0])
        z = _np(joints[sel, 2])
        d = obs.lifted[sel]
        scale = float(np.median(z) / max(np.median(d), 1e-6))
        self.log_depth_scale.data.fill_(np.log(max(scale, 1e-6)))

    def init_plain(self) -> None:
        self._set_placement(*start.facing_the_camera(self.obs, self._rest_joints()))

    def _set_placement(self, r: np.ndarray, t: np.ndarray) -> None:
        self.r0 = torch.as_tensor(r, dtype=self.dt, device=self.dev)
        self.t0 = torch.as_tensor(t, dtype=self.dt, device=self.dev)

    # --- terms ---------------------------------------------------------------------------
    def keypoint_terms(self, joints_model: torch.Tensor, lift: float = 1.0) -> torch.Tensor:
        cam = self.to_camera(joints_model)
        px = self.project(cam)
        r = (px - self.kp).norm(dim=-1) / self.scale * 100.0  # % of the person's size
        loss = (self.w * charbonnier(r, 1.0)).sum() / self.w.sum().clamp_min(1e-6)
        if self.obs.has_depth:
            surface = self.lifted * (self.depth_scale if not self.obs.metric else 1.0) + \
                (self.depth_shift if not self.obs.metric else 0.0)
            gap = (cam[:, 2] - self.radius - surface) * 100.0  # cm; > 0 behind the seen surface
            two = torch.where(self.two_sided, charbonnier(gap, 2.0), torch.relu(-gap) ** 2 / 4.0)
            m = self.has_lift.to(self.dt) * self.w
            loss = loss + lift * self.wt["lift"] * (m * two).sum() / m.sum().clamp_min(1e-6)
        return loss

    def prior_terms(self) -> torch.Tensor:
        free = self.pose_free
        loss = (self.prior[:, None] * free ** 2).sum() * 0.5 * self.wt["prior"]
        # Twist (about each bone's own Y) is rare: held harder.
        loss = loss + 2.0 * (free[:, 1] ** 2).sum()
        hinge = self.rotvecs()[0, self.f._hinges]
        # Knees and elbows do not bend backwards (beyond a little slack).
        loss = loss + self.wt["hinge"] * 20.0 * (torch.relu(-hinge[:, 0] - 0.15) ** 2).sum()
        if self.f.settings.fingers:
            loss = loss + 0.5 * (self.finger_prior[:, None] * self.pose_fingers ** 2).sum()
        # Shapes inside anny's range already (sigmoid); a light pull to the average.
        loss = loss + 0.02 * ((self.shape_logit * self.f.shape_scale) ** 2).sum()
        # Photos show children and adults: past a young adult, "age" mostly bends the rest posture,
        # which the pose can mimic; keep it from trading off against height.
        age = self.phenotypes()[0, 1]
        loss = loss + 50.0 * torch.relu(age - 0.55) ** 2
        return loss

    def surface_terms(self, sample: torch.Tensor) -> torch.Tensor:
        """``sample``: the posed subsample of the mesh (camera frame). Its normals (which side is
        outside, which points face the camera) are taken once per round, from the whole mesh."""
        obs = self.obs
        if self._normals is None:
            with torch.no_grad():
                out = self.f.body.full(self.phenotypes(), self.rotvecs())
                verts = self.to_camera(out["vertices"][0])
                self._normals = vertex_normals(verts, self.f._faces)[self.f._sample]
        normals = self._normals
        loss = torch.zeros((), dtype=self.dt, device=self.dev)
        facing = (normals * sample.detach()).sum(-1) < 0  # towards the camera
        if obs.has_depth and len(self.points):
            pts = self.points
            if not obs.metric:
                z = pts[:, 2] * self.depth_scale + self.depth_shift
                ratio = z / pts[:, 2].clamp_min(1e-6)
                pts = pts * ratio[:, None]
            if self._nn is None or self._step % self.f.settings.refresh_every == 0:
                with torch.no_grad():
                    # Each point matches the nearest facing vertex of a part its label allows
                    # (a forearm's points pull the forearm, not the chest it hangs beside).
                    cand = torch.nonzero(facing).flatten()
                    d = torch.cdist(pts, sample[cand])
                    d = torch.where(self.point_parts[:, self.f._sample_class[cand]], d, d + 1e3)
                    best = d.min(1)
                    self._nn = cand[best.indices]
                    self._matched = (best.values < 1e3).to(self.dt)
            v = sample[self._nn]
            n = normals[self._nn].detach()
            signed = ((pts - v) * n).sum(-1) * 100.0  # cm, > 0 outside the body
            dist = (pts - v).norm(dim=-1) * 100.0
            skin = charbonnier(signed, 1.0) + 0.02 * charbonnier(dist, 1.0)
            cover = torch.relu(-signed) ** 2 + 0.05 * charbonnier(signed, 1.0)
            term = torch.where(self.covering, cover, skin) * self._matched
            loss = loss + self.wt["surface"] * term.sum() / self._matched.sum().clamp_min(1.0)
        # Silhouette: every body point projects where the body may be; facing points land on
        # their own part; every pixel of the person is near a facing body point.
        px = self.project(sample)
        g = self._grid(px)
        inside = torch.nn.functional.grid_sample(self.allowed_dt, g, align_corners=False)[0, 0, 0]
        loss = loss + self.wt["inside"] * (inside / (self.scale * obs.grid_scale) * 100.0).pow(2).mean()
        pd = torch.nn.functional.grid_sample(self.part_dt, g, align_corners=False)[0, :, 0]  # [C,N]
        own = pd.gather(0, self.f._sample_class[None])[0]
        # Mean over the facing points, without selecting them (no data-dependent shapes).
        own_cm = charbonnier(own / (self.scale * obs.grid_scale) * 100.0, 1.0) * facing
        loss = loss + self.wt["part"] * own_cm.sum() / facing.sum().clamp_min(1)
        if self._cover_nn is None or self._step % self.f.settings.refresh_every == 0:
            # The nearest facing point, found without autograd (cdist's backward cost more than
            # the rest of the step) and, like the surface matches, held within a round (finding
            # it was a fifth of an evaluation); the distance is differentiated through it alone.
            cand = torch.nonzero(facing).flatten()
            self._cover_nn = cand[torch.cdist(self.cover_px, px[cand].detach()).argmin(1)] if len(cand) else None
        if self._cover_nn is not None:
            d = (self.cover_px - px[self._cover_nn]).norm(dim=-1) / self.scale * 100.0
            loss = loss + self.wt["cover"] * (self.cover_w * charbonnier(d, 1.0)).sum() / self.cover_w.sum()
        return loss

    def _grid(self, px: torch.Tensor) -> torch.Tensor:
        h, w = self.obs.size
        gx = px[:, 0] / w * 2 - 1
        gy = px[:, 1] / h * 2 - 1
        return torch.stack([gx, gy], -1)[None, None].clamp(-1.5, 1.5)

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

    def plain_loss(self) -> torch.Tensor:
        """The baseline's loss: the same terms on the whole mesh, its shape recomputed every step
        (the staged fit's evaluations are group.Group's)."""
        out = self.f.body.full(self.f.body.rest_state(self.phenotypes(), with_vertices=True), self.rotvecs())
        verts = self.to_camera(out["vertices"][0])
        with torch.no_grad():
            self._normals = vertex_normals(verts, self.f._faces)[self.f._sample]
        return self.keypoint_terms(out["joints"][0], self.wt["lift_dense"]) + self.prior_terms() + \
            self.surface_terms(verts[self.f._sample])

    def run_plain(self, max_steps: int, target_px: float | None, cancel=None, monitor=None,
                  started: float | None = None) -> int:
        opt = torch.optim.Adam(self._params(True))
        self._nn = None
        started = time.perf_counter() if started is None else started
        monitored = 0.0  # seconds spent in the monitor: not the baseline's own time
        for i in range(max_steps):
            if cancel is not None:
                cancel.check()
            self._step = i
            opt.zero_grad(set_to_none=True)
            if i % self.f.settings.refresh_every == 0:
                self._normals = None
            self.plain_loss().backward()
            opt.step()
            if i % 5 != 4:
                continue
            if target_px is not None and self.joint_error_px() <= target_px:
                return i + 1
            if monitor is not None:
                t = time.perf_counter()
                with torch.no_grad():
                    joints = self.to_camera(self.f.body.skeleton(self.phenotypes(), self.rotvecs()).joints[0])
                stop = monitor(self.obs.person_id, i + 1, t - started - monitored, _np(joints),
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
        with torch.no_grad():
            out = self.f.body.full(self.phenotypes(), self.rotvecs())
            verts = self.to_camera(out["vertices"][0])
            pts = self.points
            if not len(pts):
                return float("nan")
            if not self.obs.metric:
                z = pts[:, 2] * self.depth_scale + self.depth_shift
                pts = pts * (z / pts[:, 2].clamp_min(1e-6))[:, None]
            sample = verts[self.f._sample]
            normals = vertex_normals(verts, self.f._faces)[self.f._sample]
            skin = pts[~self.covering]
            nn = torch.cdist(skin, sample).argmin(1)
            d = ((skin - sample[nn]) * normals[nn]).sum(-1).abs()
            return float(d.median()) if len(d) else float("nan")

    def result(self):
        with torch.no_grad():
            r, t = self.placement()
            placement = np.eye(4)
            placement[:3, :3] = _np(r)
            placement[:3, 3] = _np(t)
            return _np(self.rotvecs()[0]), _np(self.phenotypes()[0]), placement


def fit_people(body: BodyModel, observations: list[PersonObservation], settings: FitSettings | None = None,
               progress=None, cancel=None) -> dict:
    """Fit every person; the per-person arrays of docs/body_format.md, stacked."""
    settings = settings or FitSettings()
    previous = torch.get_num_threads()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    try:
        return _fit_people(body, observations, settings, progress, cancel)
    finally:
        torch.set_num_threads(previous)


def _fit_people(body, observations, settings, progress, cancel) -> dict:
    fitter = BodyFitter(body, settings)
    fits = []
    size = max(1, settings.group_size)
    for i in range(0, len(observations), size):
        group = observations[i:i + size]
        if progress is not None:
            ids = ", ".join(str(o.person_id) for o in group)
            first = " (compiling it first: minutes, once per server)" \
                if settings.compile and not compiled_for(len(group)) else ""
            progress("fit", i / max(len(observations), 1),
                     f"fitting the bod{'ies' if len(group) > 1 else 'y'} of person{'s' if len(group) > 1 else ''} {ids}{first}")
        fits += fitter.fit_group(group, cancel)
    if not fits:
        raise ValueError("no person to fit")
    arrays = body.evaluate(np.stack([f.rotvecs for f in fits]), np.stack([f.phenotypes for f in fits]),
                           np.stack([f.placement for f in fits]))
    arrays["person_ids"] = np.array([f.person_id for f in fits], np.int32)
    arrays["joints_estimated"] = np.stack([f.joints_estimated for f in fits])
    arrays["reports"] = np.array([json.dumps(f.report) for f in fits])
    if progress is not None:
        progress("fit", 1.0, f"fitted {len(fits)} bodies")
    return arrays
