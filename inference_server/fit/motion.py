# SPDX-License-Identifier: GPL-3.0-or-later
"""Drive one fitted body through a clip: per frame, the pose that puts the body's joints on a
track's (smoothed) 3D joints, the shape held.

The shape, the fingers and the reference pose come from one full fit (``solver``) of the track's
best-seen frame. Every other frame is solved on the skeleton pass alone (bones + the ~100
vertices the joint regressor reads, with the shaped rest body computed once), outwards from the
reference frame, each frame warm-started from its neighbour: its placement first, in closed
form (Kabsch on the torso), then ~10 L-BFGS iterations on pose and placement, with one
optimiser for the whole track so the curvature learnt on the last frames steers the next.

Targets are matched in two ways:
- a name the fit knows (``correspondences.JOINT_NAMES``: shoulders, elbows, wrists, hips,
  knees, ankles...) is the body's own joint;
- any other name (a rig's pelvis, chest, head top, hand end, toe tip...) is a *marker*: a point
  carried rigidly by one bone, calibrated once on the reference frame (where the full fit and
  the target are both known), so a convention that differs from anny's costs nothing.
Priors: a pull towards the previous frame's pose (what the joints do not measure, such as the
twist of a forearm, carries over instead of drifting), towards the reference pose for the spine
and neck, hinge limits on knees and elbows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from .body_model import BodyModel, rotvec_to_matrix
from .correspondences import JOINT_NAMES
from .bones import BODY_BONES
from .limits import hinge_floors, hinge_penalty, hinge_rows
from .tensor_ops import charbonnier

# Marker names of the add-on's animation rig (core/motion/rig.MOTION_JOINTS) -> the anny bone
# that carries them. Names in neither table ride on the fitted bone with the nearest head.
MARKER_BONES = {
    "pelvis": "root", "spine": "spine03", "chest": "spine01", "neck": "neck01", "head": "head",
    "head_top": "head", "left_hand_end": "wrist.L", "right_hand_end": "wrist.R",
    "left_ball": "foot.L", "right_ball": "foot.R", "left_toe_tip": "foot.L", "right_toe_tip": "foot.R",
}
_TORSO_TARGETS = ("left_hip", "right_hip", "left_shoulder", "right_shoulder", "pelvis", "neck", "spine", "chest")
_TORSO = ("spine05", "spine04", "spine03", "spine02", "spine01", "neck01", "neck02", "neck03", "head")
MAX_FRAMES = 20000
_DM = 0.1


@dataclass
class MotionSettings:
    iterations: int = 10  # L-BFGS iterations per frame (warm-started, curvature carried over)
    marker_weight: float = 0.5  # a marker counts half a joint (its offset is calibrated once)
    estimated_weight: float = 0.3  # a joint the tracker filled or derived, not measured
    temporal: float = 6.0  # pull towards the previous frame's pose (per rad^2)
    torso_reference: float = 2.0  # spine and neck towards the reference frame's bends
    threads: int | None = 1
    robust_cm: float = 1.0
    # The solved poses, smoothed: "causal" (frame t reads no later frame: the clip's joints
    # already used the 2 frames of look-ahead), "centred" (whole-clip mode) or "none".
    smoothing: str = "causal"
    follow: float = 0.7  # causal: tracking gain (1 = no smoothing)
    centred_frames: int = 3  # centred: frames each side
    tolerance: float = 1e-4  # L-BFGS stops a frame when a step changes the loss (cm^2) by less


@dataclass
class MotionResult:
    rotvecs: np.ndarray  # [T,B,3]
    placement: np.ndarray  # [T,4,4] model -> camera
    bone_matrices: np.ndarray  # [T,B,4,4] model frame
    joints: np.ndarray  # [T,J,3] camera frame, JOINT_NAMES order
    residual_m: np.ndarray  # [T] mean distance of the weighted targets to the body's points
    seconds: float


def drive_body(body: BodyModel, phenotypes, reference_rotvecs, reference_placement, targets,
               target_names, weights, reference_frame: int, settings: MotionSettings | None = None,
               cancel=None, progress=None) -> MotionResult:
    """Poses of one body (``phenotypes`` [6]) for every frame of ``targets`` [T,N,3] (camera frame,
    metres, NaN = unknown; ``weights`` [T,N] >= 0). Frame ``reference_frame`` holds the full fit
    (``reference_rotvecs`` [B,3], ``reference_placement`` [4,4]) and calibrates the markers."""
    settings = settings or MotionSettings()
    previous = torch.get_num_threads()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    try:
        return _Driver(body, phenotypes, reference_rotvecs, reference_placement, targets,
                       list(target_names), weights, int(reference_frame), settings).run(cancel, progress)
    finally:
        torch.set_num_threads(previous)


class _Driver:
    def __init__(self, body, phenotypes, ref_rot, ref_placement, targets, names, weights, ref, settings):
        dt = body.dtype
        self.body, self.s, self.dt = body, settings, dt
        targets = np.asarray(targets, np.float64)
        weights = np.asarray(weights, np.float64)
        if targets.ndim != 3 or targets.shape[2] != 3 or targets.shape[1] != len(names):
            raise ValueError(f"targets must be [T,{len(names)},3] (one column per target name), got {list(targets.shape)}")
        if weights.shape != targets.shape[:2]:
            raise ValueError(f"weights must be {list(targets.shape[:2])}, got {list(weights.shape)}")
        if not 0 < len(targets) <= MAX_FRAMES:
            raise ValueError(f"a track must have 1..{MAX_FRAMES} frames, got {len(targets)}")
        if not 0 <= ref < len(targets):
            raise ValueError(f"reference_frame {ref} is outside the track's {len(targets)} frames")
        self.ref = ref
        if settings.smoothing not in ("causal", "centred", "none"):
            raise ValueError(f"smoothing must be 'causal', 'centred' or 'none', got {settings.smoothing!r}")
        self.t_len = len(targets)
        ok = np.isfinite(targets).all(-1) & (weights > 0)
        self.targets = torch.as_tensor(np.where(ok[..., None], targets, 0.0), dtype=dt)
        self.weights = torch.as_tensor(np.where(ok, weights, 0.0), dtype=dt)
        phen = torch.as_tensor(np.asarray(phenotypes, np.float64).reshape(1, -1), dtype=dt)
        with torch.no_grad():
            self.rest = body.rest_state(phen).detach()
        self.ref_rot = torch.as_tensor(np.asarray(ref_rot, np.float64), dtype=dt)[None]
        p = np.asarray(ref_placement, np.float64)
        self.ref_r, self.ref_t = torch.as_tensor(p[:3, :3], dtype=dt), torch.as_tensor(p[:3, 3], dtype=dt)
        self.free = torch.tensor([body.bone_index[b] for b in BODY_BONES], dtype=torch.long)
        self.hinges = torch.tensor(hinge_rows(), dtype=torch.long)
        self.hinge_floors = hinge_floors(body).to(dt)
        torso = torch.zeros(len(BODY_BONES), dtype=dt)
        torso[[BODY_BONES.index(b) for b in _TORSO]] = 1.0
        self.torso = torso
        # Which body point answers each target: a joint (index into JOINT_NAMES) or a marker.
        self.direct = [(i, JOINT_NAMES.index(n)) for i, n in enumerate(names) if n in JOINT_NAMES]
        self.markers = [i for i, n in enumerate(names) if n not in JOINT_NAMES]
        scale = torch.ones(len(names), dtype=dt)
        scale[self.markers] = settings.marker_weight
        self.name_weight = scale
        self._calibrate(names)
        # The placement turns about the body's centre (between the hips at the reference pose),
        # not anny's origin at the feet: turning the body then barely moves it, and L-BFGS is
        # not left to untangle a rotation from the translation it drags along.
        with torch.no_grad():
            j = self._skeleton(self.ref_rot).joints[0]
            self.centre = 0.5 * (j[JOINT_NAMES.index("left_hip")] + j[JOINT_NAMES.index("right_hip")])
        self.torso_targets = [i for i, n in enumerate(names) if n in _TORSO_TARGETS]
        self._vars = (torch.zeros((len(BODY_BONES), 3), dtype=dt, requires_grad=True),
                      torch.zeros(3, dtype=dt, requires_grad=True), torch.zeros(3, dtype=dt, requires_grad=True))
        self._opt = None

    # --- the body's points for a pose ----------------------------------------------------------
    def _skeleton(self, rotvecs):
        return self.body.skeleton(self.rest, rotvecs)

    def _points(self, sk, r, t):
        """Model-frame points answering each target, then to the camera: [N,3]."""
        n = len(self.name_weight)
        out = torch.zeros((n, 3), dtype=self.dt)
        if self.direct:
            ti, ji = zip(*self.direct)
            out[list(ti)] = sk.joints[0, list(ji)]
        if self.markers:
            m = sk.bone_poses[0, self.marker_bone]
            out[self.markers] = (m[:, :3, :3] @ self.marker_offset[..., None])[..., 0] + m[:, :3, 3]
        return out @ r.T + t

    def _calibrate(self, names):
        """Marker offsets in their bone's frame, from the reference frame's fit and targets."""
        if not self.markers:
            self.marker_bone = torch.zeros(0, dtype=torch.long)
            self.marker_offset = torch.zeros((0, 3), dtype=self.dt)
            return
        with torch.no_grad():
            sk = self._skeleton(self.ref_rot)
            poses = sk.bone_poses[0]
            heads = poses[self.free, :3, 3]
            target = self.targets[self.ref]
            bones, offsets = [], []
            for i in self.markers:
                model = (target[i] - self.ref_t) @ self.ref_r  # camera -> model frame
                bone = MARKER_BONES.get(names[i])
                if bone is None:  # the fitted bone whose head is nearest
                    bone = BODY_BONES[int((heads - model).norm(dim=-1).argmin())]
                b = self.body.bone_index[bone]
                if float(self.weights[self.ref, i]) <= 0:  # not seen on the reference frame
                    local = torch.zeros(3, dtype=self.dt)  # the bone's head: a guess, weighted down
                    self.name_weight[i] *= 0.3
                else:
                    local = (model - poses[b, :3, 3]) @ poses[b, :3, :3]
                bones.append(b)
                offsets.append(local)
        self.marker_bone = torch.tensor(bones, dtype=torch.long)
        self.marker_offset = torch.stack(offsets)

    def _place(self, rrot, trans):
        """(R, t) of the placement for the turn ``rrot`` and shift ``trans`` (metres) of the
        reference placement about the body's centre."""
        r = rotvec_to_matrix(rrot) @ self.ref_r
        return r, self.ref_t + trans + (self.ref_r - r) @ self.centre

    def _rigid_start(self, frame: int, free, rrot, trans):
        """(rrot, trans) putting the body of pose ``free`` on the frame's torso targets in closed
        form (weighted Kabsch): each frame starts with its placement right."""
        idx = [i for i in self.torso_targets if float(self.weights[frame, i]) > 0]
        if len(idx) < 3:
            return rrot, trans
        import roma

        with torch.no_grad():
            rot = self.ref_rot.clone()
            rot[0, self.free] = free
            eye = torch.eye(3, dtype=self.dt)
            model = self._points(self._skeleton(rot), eye, torch.zeros(3, dtype=self.dt))[idx].double()
            target = self.targets[frame, idx].double()
            w = self.weights[frame, idx].double()
            w = w / w.sum()
            mc, tc = (w[:, None] * model).sum(0), (w[:, None] * target).sum(0)
            cov = ((target - tc) * w[:, None]).T @ (model - mc)
            u, _, vt = torch.linalg.svd(cov)
            d = torch.sign(torch.linalg.det(u @ vt))
            r = u @ torch.diag(torch.tensor([1.0, 1.0, float(d)], dtype=torch.float64)) @ vt
            t = tc - r @ mc
            new_rrot = roma.rotmat_to_rotvec(r @ self.ref_r.double().T).to(self.dt)
            c, r0, t0 = self.centre.double(), self.ref_r.double(), self.ref_t.double()
            new_trans = (t - t0 - (r0 - r) @ c).to(self.dt)
        return new_rrot, new_trans

    # --- per frame ---------------------------------------------------------------------------
    def _solve(self, frame: int, init_free, init_rrot, init_t, prior_free):
        s = self.s
        w = self.weights[frame] * self.name_weight
        target = self.targets[frame]
        pose_free, rrot, trans_dm = self._vars
        with torch.no_grad():  # this frame's start, in the variables the optimiser keeps
            pose_free.copy_(init_free)
            rrot.copy_(init_rrot)
            # Translation in decimetres: a unit step moves the body about as much as a unit
            # step of the rotations (metres made L-BFGS crawl).
            trans_dm.copy_(init_t / _DM)
        base = self.ref_rot.clone()
        wsum = w.sum().clamp_min(1e-6)

        def loss_fn():
            rot = base.clone()
            rot[0, self.free] = pose_free
            sk = self._skeleton(rot)
            pts = self._points(sk, *self._place(rrot, trans_dm * _DM))
            err = (pts - target).norm(dim=-1) * 100.0  # cm
            loss = (w * charbonnier(err, s.robust_cm)).sum() / wsum
            d = pose_free - prior_free
            loss = loss + 0.5 * s.temporal * (d ** 2).sum() + 2.0 * (d[:, 1] ** 2).sum()  # twist carries over
            ref_free = self.ref_rot[0, self.free]
            loss = loss + 0.5 * s.torso_reference * (self.torso[:, None] * (pose_free - ref_free) ** 2).sum()
            loss = loss + hinge_penalty(pose_free, self.hinges, self.hinge_floors)
            return loss

        if float(wsum) > 1e-6:
            opt = self._optimizer()

            def closure():
                opt.zero_grad(set_to_none=True)
                loss = loss_fn()
                loss.backward()
                return loss

            opt.step(closure)
        return pose_free.detach().clone(), rrot.detach().clone(), (trans_dm * _DM).detach()

    def _optimizer(self) -> torch.optim.LBFGS:
        """One L-BFGS for the whole track: neighbouring frames pose nearly the same problem, so
        the curvature it learnt on the last frames steers the first steps of the next (a fresh
        one starts each frame with a gradient step and needed twice the iterations)."""
        if self._opt is None:
            self._opt = torch.optim.LBFGS(list(self._vars), lr=1.0, max_iter=self.s.iterations, history_size=10,
                                          line_search_fn="strong_wolfe", tolerance_grad=1e-5,
                                          tolerance_change=self.s.tolerance)
        else:
            state = self._opt.state[self._vars[0]]
            if "d" in state:  # no curvature pair between two frames' problems: the last step is void
                state["d"] = torch.zeros_like(state["d"])
        return self._opt

    def run(self, cancel=None, progress=None) -> MotionResult:
        started = time.perf_counter()
        nf = len(BODY_BONES)
        free = torch.zeros((self.t_len, nf, 3), dtype=self.dt)
        rrot = torch.zeros((self.t_len, 3), dtype=self.dt)
        trans = torch.zeros((self.t_len, 3), dtype=self.dt)
        ref_free = self.ref_rot[0, self.free]
        # The reference frame keeps its full fit (markers were calibrated on it); the others
        # follow outwards from it, each warm-started from (and pulled towards) its neighbour.
        free[self.ref] = ref_free
        order = [(f, f - 1) for f in range(self.ref + 1, self.t_len)] + \
                [(f, f + 1) for f in range(self.ref - 1, -1, -1)]
        for done, (frame, neighbour) in enumerate(order):
            if cancel is not None:
                cancel.check()
            if progress is not None and done % 10 == 0:
                progress("body motion", done / max(len(order), 1), f"posing the body: frame {done + 1} of {self.t_len}")
            guess = [free[neighbour], *self._rigid_start(frame, free[neighbour], rrot[neighbour], trans[neighbour])]
            free[frame], rrot[frame], trans[frame] = self._solve(frame, *guess, guess[0])
        # What is left of each frame's own solve (a few mm of wiggle where the joints leave a
        # little freedom) is smoothed away: causally when the clip's joints already used their
        # look-ahead, over a centred window when the whole clip is known.
        if self.s.smoothing == "causal":
            a = self.s.follow
            free, rrot, trans = _smooth_rotations(free, follow=a), _smooth_rotations(rrot, follow=a), _follow(trans, a)
        elif self.s.smoothing == "centred":
            n = self.s.centred_frames
            free, rrot, trans = _smooth_rotations(free, n), _smooth_rotations(rrot, n), _smooth_values(trans, n)
        with torch.no_grad():
            rot = self.ref_rot.expand(self.t_len, -1, -1).clone()
            rot[:, self.free] = free
            sk = self.body.skeleton(self.rest.expand(self.t_len), rot)
            r = rotvec_to_matrix(rrot) @ self.ref_r  # [T,3,3]
            t = self.ref_t + trans + ((self.ref_r - r) @ self.centre[:, None])[..., 0]
            joints = (r[:, None] @ sk.joints[..., None])[..., 0] + t[:, None]
            residual = np.zeros(self.t_len)
            for f in range(self.t_len):  # per frame: the weighted mean distance, metres
                pts = self._points(type(sk)(sk.joints[f:f + 1], sk.bone_poses[f:f + 1], sk.rest_bone_poses[f:f + 1],
                                            sk.transforms[f:f + 1]), r[f], t[f])
                w = self.weights[f]
                d = (pts - self.targets[f]).norm(dim=-1)
                residual[f] = float((w * d).sum() / w.sum().clamp_min(1e-6))
            placement = np.tile(np.eye(4), (self.t_len, 1, 1))
            placement[:, :3, :3] = r.double().numpy()
            placement[:, :3, 3] = t.double().numpy()
        if progress is not None:
            progress("body motion", 1.0, f"posed the body on {self.t_len} frames")
        return MotionResult(rot.double().numpy(), placement, sk.bone_poses.double().numpy(),
                            joints.double().numpy(), residual, time.perf_counter() - started)


def _kernel(half_width: int) -> np.ndarray:
    """Binomial weights over -half_width..half_width (a gentle low-pass)."""
    from math import comb

    return np.array([comb(2 * half_width, k) for k in range(2 * half_width + 1)], np.float64)


def _smooth_values(x: torch.Tensor, half_width: int) -> torch.Tensor:
    """Centred weighted mean along time (axis 0). Near the track's ends the window narrows to
    stay centred (a cut, lopsided window would drag the first and last frames along the motion)."""
    t_len = x.shape[0]
    out = torch.zeros_like(x)
    for f in range(t_len):
        n = min(half_width, f, t_len - 1 - f)
        w = torch.as_tensor(_kernel(n), dtype=x.dtype)
        w = w / w.sum()
        out[f] = (w.reshape(-1, *([1] * (x.dim() - 1))) * x[f - n:f + n + 1]).sum(0)
    return out


def _follow(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Causal constant-velocity tracking (an alpha-beta filter with the steady-state Kalman
    relation beta = alpha^2 / (2 - alpha)) along time: frame t reads no later frame."""
    beta = alpha * alpha / (2.0 - alpha)
    out = torch.empty_like(x)
    est, vel = x[0].clone(), torch.zeros_like(x[0])
    out[0] = est
    for f in range(1, len(x)):
        pred = est + vel
        r = x[f] - pred
        est = pred + alpha * r
        vel = vel + beta * r
        out[f] = est
    return out


def _smooth_rotations(rotvecs: torch.Tensor, half_width: int = 0, follow: float | None = None) -> torch.Tensor:
    """Rotation vectors [T,...,3] smoothed as unit quaternions (signs made continuous in time,
    then a centred weighted mean over ``half_width`` frames each side or, with ``follow``, the
    causal tracking filter; renormalised): no wrap-around at pi."""
    import roma

    q = roma.rotvec_to_unitquat(rotvecs.double())
    flips = torch.ones(q.shape[:-1], dtype=q.dtype)
    for f in range(1, len(q)):
        flips[f] = flips[f - 1] * torch.where((q[f] * q[f - 1]).sum(-1) < 0, -1.0, 1.0)
    q = q * flips[..., None]
    q = _follow(q, follow) if follow is not None else _smooth_values(q, half_width)
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return roma.unitquat_to_rotvec(q).to(rotvecs.dtype)


def rotvecs_from_bone_matrices(body: BodyModel, phenotypes, bone_matrices) -> np.ndarray:
    """The pose variables [B,3] of a pose given as bone matrices [B,4,4] (model frame, as a fit
    returns them, docs/body_format.md): each bone's rotation relative to its rest and parent."""
    import roma

    with torch.no_grad():
        phen = torch.as_tensor(np.asarray(phenotypes, np.float64).reshape(1, -1), dtype=body.dtype)
        rest = body.rest_state(phen).poses[0].double()
    pose = torch.as_tensor(np.asarray(bone_matrices, np.float64))
    if pose.shape != rest.shape:
        raise ValueError(f"bone matrices must be {list(rest.shape)}, got {list(pose.shape)}")
    parents = torch.tensor([max(p, 0) for p in body.parents])
    rest_local = torch.linalg.inv(rest[parents]) @ rest
    pose_local = torch.linalg.inv(pose[parents]) @ pose
    local = torch.linalg.inv(rest_local) @ pose_local
    rot = roma.rotmat_to_rotvec(roma.special_procrustes(local[:, :3, :3]))
    rot[0] = 0.0  # the root's rotation is the placement's
    return rot.numpy()
