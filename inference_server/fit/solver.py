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
3. **Surface stage**: rounds (three with metric depth, two without) adding the dense cues:
   observed skin points on the body's surface, covering (clothing, hair) outside or on it,
   never inside; the body's parts inside their segmentation parts and the silhouette covered.
   Correspondences are nearest points of the surface, on the parts the point's label allows,
   refreshed every round (ICP); each evaluation skins a fixed 4,000-vertex subsample of the
   mesh, which carries them. With metric depth the shape is free here; without it, it is held
   and a round on the shape and placement alone follows.
Priors throughout: rotations pulled towards the rest pose (hard for bones no keypoint sees, so
an unseen limb stands neutral), hinge limits for knees and elbows, twist limits, phenotypes
kept inside anny's [0, 1] by a sigmoid.

``plain=True`` is the benchmark's baseline: the same terms, all at once, from the rest pose
facing the camera, on the full mesh, plain Adam.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from ..protocol import contract
from .bones import BODY_BONES, FINGER_BONES
from .body_model import BodyModel
from .correspondences import JOINT_NAMES
from .group import Group, compiled_for
from .group_start import start_closed_form
from .guessed import joint_sources, limb_report
from .limits import hinge_floors, hinge_rows
from .observations import PersonObservation, class_index_of_vertices
from .problem import PersonProblem
from .solver_settings import FitSettings  # noqa: F401  (re-exported: callers import it from here)
from .surface_match import SurfaceIndex


# The report's "depth" where it is the backend's guess, not a measurement: metric depth with the
# backend's own 3D pose, i.e. the offline backend's pseudo-depth, made from the person's outline
# (as the pose prior's doubt and the girth prior read it). Its surface residual says how far the
# body lies from that guess (loose clothing: a few cm), not whether a measurement is off.
GUESSED_DEPTH = "guessed from the outline"


@dataclass
class PersonFit:
    person_id: int
    rotvecs: np.ndarray  # [B,3]
    phenotypes: np.ndarray  # [6]
    placement: np.ndarray  # [4,4]
    joints_estimated: np.ndarray  # [J] bool
    report: dict = field(default_factory=dict)


# Per body model: its vertex sample, shape preconditioner, neutral pose and surface index
# (BodyFitter), by (dtype, mesh_samples). Read-only once made: the fitter's users clone what they change.
_PER_BODY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class BodyFitter:
    def __init__(self, body: BodyModel, settings: FitSettings | None = None):
        self.body = body
        self.settings = settings or FitSettings()
        names = body.bone_names
        self.device = dev = body.device  # the fit runs where the body model lives (cpu or cuda)
        index = lambda bones: torch.tensor([body.bone_index[b] for b in bones], dtype=torch.long, device=dev)  # noqa: E731
        self._free, self._fingers = index(BODY_BONES), index(FINGER_BONES)
        # knees and elbows, as rows of the free bones' rotations (the prior reads them there),
        # and how far each may straighten (limits.py)
        self._hinges = torch.tensor(hinge_rows(), dtype=torch.long, device=dev)
        self._hinge_floors = hinge_floors(body).to(self.settings.dtype)
        self.nbones = len(names)
        t = body.template()
        self._faces = torch.as_tensor(t["faces"].astype(np.int64), device=dev)
        cls = class_index_of_vertices(t["vertex_parts"], t["part_names"])
        nv = len(cls)
        step = max(1, nv // self.settings.mesh_samples)
        self._sample = torch.arange(0, nv, step, device=dev)
        self._vertex_class = torch.as_tensor(cls, device=dev)
        self._sample_class = self._vertex_class[self._sample]
        # What depends on the body model alone is measured once per model (~50 ms a fit before).
        shared = _PER_BODY.setdefault(body, {})
        key = (self.settings.dtype, self.settings.mesh_samples)
        if key not in shared:
            rest = body.anny.template_vertices.to(dev, self.settings.dtype)
            shared[key] = (body.vertex_sample(self._sample), self._shape_preconditioner(), self._neutral_pose(),
                           SurfaceIndex(self._faces, rest, self._sample))
        self._vertex_sample, self.shape_scale, self.neutral, self.surface = shared[key]

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
        clock = _StageClock(self.device)
        s = self.settings
        probs = [PersonProblem(self, obs) for obs in observations]
        if s.plain:  # the baseline: one person at a time, as the benchmark times it
            steps = []
            for prob in probs:
                started = time.perf_counter()  # each person's own time, as the monitor reads it
                prob.init_plain()
                steps.append(prob.run_plain(s.plain_steps, s.target_joint_px, cancel, s.plain_monitor, started))
            stages = [{"plain": n} for n in steps]
        else:
            if cancel is not None:
                cancel.check()
            start_closed_form(probs, cancel)  # everyone's start in batched passes
            metric = all(obs.metric for obs in observations)
            tries = self._other_folds(probs)
            make = self._group_class()
            group = make([p for tried in tries for p in tried])
            clock("start")
            n1 = group.run_lbfgs(s.skeleton_steps if metric else s.skeleton_steps_without_metric,
                                 dense=False, cancel=cancel)
            clock("skeleton")
            # With metric depth the surface rounds share their curvature history: over the
            # ground truth's 18 metric rows, joints max 1.28 -> 1.24 cm on average (2 x 25, the
            # lifted depths at 0.5) for no more evaluations.
            # Without it, converging further lets the depth scale drift (relative depth's hidden
            # side 1.80 -> 2.09 cm), so each round starts afresh there.
            n2 = group.run_lbfgs(s.surface_steps if metric else s.surface_steps_without_metric, dense=True,
                                 rounds=s.surface_rounds if metric else s.surface_rounds_without_metric,
                                 shape=metric, keep_history=metric, cancel=cancel)
            clock("surface")
            if len(group.problems) > len(probs):
                probs, (n1, n2) = self._keep_best_folds(group, tries, (n1, n2))
                group = make(probs)
            n4 = self._polish(group, cancel) if metric else [0] * len(probs)
            clock("polish")
            # Without metric depth the body's size and girth only the surface tells well: a round
            # on the shape and placement alone, where those small gradients are not drowned by
            # the pose's.
            n3 = group.run_lbfgs(s.shape_steps, dense=True, cancel=cancel, shape_round=True) \
                if s.shape_steps and not metric else [0] * len(probs)
            clock("shape")
            stages = [{"skeleton": a, "surface": b + c, "polish": d} for a, b, c, d in zip(n1, n2, n3, n4)]
        seconds = (time.perf_counter() - start) / len(probs)
        fits = [self._person_fit(prob, steps, seconds) for prob, steps in zip(probs, stages)]
        clock("report")  # after the fit's seconds, as before: the report's own evaluations
        for fit in fits:
            fit.report["stage_seconds"] = clock.shares(len(probs))
        return fits

    def _polish(self, group, cancel) -> list[int]:
        """The last stage (FitSettings.polish_steps) for a group with the backend's own 3D pose:
        each person's evaluations (0 for all when there is none)."""
        probs = group.problems
        if not self.settings.polish_steps or all(p.obs.world is None for p in probs):
            return [0] * len(probs)
        for p in probs:
            p.polishing = True
        try:
            return group.run_lbfgs(self.settings.polish_steps, dense=True, shape=self.settings.polish_shape,
                                   cancel=cancel)
        finally:
            for p in probs:
                p.polishing = False

    def _group_class(self):
        """group.Group or graph_solver.GraphGroup, by FitSettings.solver."""
        kind = self.settings.solver
        if kind == "auto":
            kind = "graph" if self.device.type == "cuda" else "lbfgs"
        if kind not in ("lbfgs", "graph"):
            raise ValueError(f"the body fit's solver is lbfgs, graph or auto, not {kind!r}")
        if kind == "graph":
            from .graph_solver import GraphGroup

            return GraphGroup
        return Group

    def _other_folds(self, probs: list) -> list[list]:
        """Per person: its problem, then one per limb fold its start guessed (PersonProblem.folds)
        started with that fold turned over. They go through the skeleton and surface stages in
        the same batched group as everyone else (_keep_best_folds then keeps one)."""
        tries = [[prob] for prob in probs]
        for prob, tried in zip(probs, tries):
            tried += [prob.other_fold(joint) for joint in prob.folds[:self.settings.fold_tries]]
        return tries

    @staticmethod
    def _keep_best_folds(group: Group, tries: list[list], counts: tuple) -> tuple[list, tuple]:
        """Per person, the try whose loss (correspondences picked afresh) is lowest. Judged
        after the surface stage: after the keypoint stage a fold over a hole reprojects as well
        either way, and the surface's loss there picked the worse fold on 1 of 8 noisy scenes
        (docs/body_fit.md). Returns (the problems kept, ``counts`` [stage][problem] of them)."""
        with torch.no_grad():
            group.pick_correspondences()
            losses = group.losses(dense=True).tolist()
        kept, i = [], 0
        for tried in tries:
            best = i + min(range(len(tried)), key=lambda k: losses[i + k])
            kept.append(best)
            if len(tried) > 1:  # the people without a guessed fold report none
                chosen = group.problems[best]
                chosen.fold_report = {"guessed": [JOINT_NAMES[j] for j in tried[0].folds],
                                      "flipped": [JOINT_NAMES[j] for j in chosen.flipped]}
            i += len(tried)
        return [group.problems[k] for k in kept], tuple([c[k] for k in kept] for c in counts)

    def _person_fit(self, prob: "PersonProblem", stages: dict, seconds: float) -> PersonFit:
        obs = prob.obs
        rot, phen, placement = prob.result()
        if not (np.isfinite(rot).all() and np.isfinite(phen).all() and np.isfinite(placement).all()):
            raise FloatingPointError(f"the body fit of person {obs.person_id} diverged (its pose or shape is not "
                                     f"finite): please report it with the photo or maps file")
        err = prob.joint_error_px()
        report = {"seconds": round(seconds, 3), "steps": dict(stages),
                  "reprojection_px": round(err, 2),
                  "reprojection_pct": round(100.0 * err / obs.scale_px, 2),  # of the person's size
                  "depth": (GUESSED_DEPTH if obs.world is not None else "metric") if obs.metric else
                  ("relative (scale solved)" if obs.has_depth else "none (keypoints and masks)"),
                  "depth_scale": round(float(prob.depth_scale.detach()), 4) if obs.has_depth and not obs.metric else None,
                  "keypoints_seen": int(obs.seen.sum())}
        if obs.has_depth:
            report["surface_residual_m"] = round(prob.surface_residual(), 4)
        if prob.fold_report:
            report["limb_folds"] = prob.fold_report  # guessed by the start, and the ones turned over
        return PersonFit(obs.person_id, rot, phen, placement, ~obs.seen.copy(), report)


class _StageClock:
    """Seconds per stage of a group's fit (the report's ``stage_seconds``, each person's share).
    On a GPU it waits for the device at each boundary: a handful of waits per fit."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.last = time.perf_counter()
        self.seconds: dict = {}

    def __call__(self, stage: str) -> None:
        if self.cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self.last
        self.last = now

    def shares(self, people: int) -> dict:
        return {k: round(v / people, 4) for k, v in self.seconds.items()}


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
                if settings.compile and not compiled_for(group) else ""
            progress("fit", i / max(len(observations), 1),
                     f"fitting the bod{'ies' if len(group) > 1 else 'y'} of person{'s' if len(group) > 1 else ''} {ids}{first}")
        fits += fitter.fit_group(group, cancel)  # checks cancel per person and step
    if not fits:
        raise ValueError("no person to fit")
    arrays = body.evaluate(np.stack([f.rotvecs for f in fits]), np.stack([f.phenotypes for f in fits]),
                           np.stack([f.placement for f in fits]))
    arrays["person_ids"] = np.array([f.person_id for f in fits], np.int32)
    arrays["joints_estimated"] = np.stack([f.joints_estimated for f in fits])
    by_id = {o.person_id: o for o in observations}
    for f, joints in zip(fits, arrays["joints"]):  # seen, from the 3D pose or the prior's (guessed.py)
        o = by_id[f.person_id]
        f.report["guessed"] = limb_report(joint_sources(o.seen, o.world_weights, joints, o.intrinsics, o.size))
    arrays["reports"] = np.array([contract.report_json(f.report) for f in fits])  # NaN -> null
    if progress is not None:
        progress("fit", 1.0, f"fitted {len(fits)} bodies")
    return arrays
