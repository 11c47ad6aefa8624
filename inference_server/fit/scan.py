# SPDX-License-Identifier: GPL-3.0-or-later
"""One body from several views of one person (a turn-around clip, photos from around them).

The views are fitted as the people of a group are (``group.Group``: one batched body pass per
evaluation), then made one body: one shape shared by every view, a pose and a placement per view.

1. **Per view** (groups of ``FitSettings.group_size`` views): the closed-form start, the skeleton
   stage and one surface round, as ``solver`` fits a photo's people. Warm start: every group
   after the first starts from the shape the views before it agreed on (the closed-form size
   pick sees one side only).
2. **One shape**: the views' shape logits averaged (weighted by each view's surface points), then
   shared: every view's problem holds the *same* tensor, so each evaluation's gradient on it is
   the sum of every view's evidence: the back's surface measures the back, the sides the sides.
3. **Joint rounds**: one L-BFGS on the shared shape and every view's pose and placement, the
   correspondences refreshed between rounds (the dense terms of every view at once).

The views' own clothing/hair thickness (the ``clothed`` layer) and texture are combined on the
add-on side (``sapiens_blender/core/body/scan.py``): they need the maps, not the optimiser.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import torch

from .group import Group
from .group_start import start_closed_form
from .observations import BODY_CLASSES
from .problem import PersonProblem
from .solver import BodyFitter, FitSettings
from .tensor_ops import charbonnier, rescaled_depth
from .terms import GroupTerms

MAX_VIEWS = 64


@dataclass
class ScanSettings:
    joint_rounds: int = 2  # rounds of the shared-shape stage, correspondences refreshed between
    joint_steps: int = 15  # L-BFGS iterations per joint round
    view_surface_rounds: int = 1  # surface rounds per view before the shape is shared
    # Views each side whose pose is tried as a view's start (the person barely moves between
    # views; a profile's arm fold is the start's usual miss).
    neighbours: int = 2
    # A view whose surface residual is over this many times the views' median is fitted again
    # from its neighbours' turn and pose (``_rescue``).
    outlier: float = 1.5
    # Pull (per rad^2) of each view's limb rotations towards the next view's: the person holds
    # about the same pose through a turn-around, so each view's noise is averaged with its
    # neighbours' instead of bending that view's arms on its own. On the 8-view ground truth
    # (arms ±4° apart): 0 -> 10 took the views' median joint error 1.6 -> 1.3 cm and the first
    # view's hidden side 1.72 -> 1.60 cm; 30 bent the first view's arms (max joint 2.7 -> 3.8 cm).
    consistency: float = 10.0
    # The clothing's thickness per body part (one per class, shared by every view) fitted in the
    # joint rounds: each covering point pulled to the body + its part's thickness (two-sided,
    # this weight x a skin point's). Without it the one-sided covering term lets each view's
    # covered limbs lean ~1 cm towards its own camera, into the clothes (the legs under 2 cm
    # of trousers on the ground truth), and no other view's evidence can say how far.
    thickness: float = 1.0
    thickness_prior: float = 0.05  # per cm^2 of a part's thickness away from 1 cm
    # Pull (per rad^2) of every view's limb rotations towards their mean over the views. Each
    # view sees only its own side, so a limb nearer that view's camera under thinner clothes
    # fits its pixels as well as the truth does: a lean towards the camera that turns with the
    # views. Their mean has none of it; neighbours' (``consistency``) nearly the same. On the
    # 24-view ground truth (with ``thickness``): 0 -> 20 took the first view's covered legs from
    # 0.7-0.9 cm towards the camera to under 0.3 cm.
    agreement: float = 20.0


def fit_views(body, observations: list, settings: FitSettings | None = None, scan: ScanSettings | None = None,
              progress=None, cancel=None) -> dict:
    """One body for ``observations`` (one ``PersonObservation`` per view, the same person):
    the per-person arrays of docs/body_format.md stacked per view (person ``k`` = view ``k-1``),
    every row with the same phenotypes; ``reports`` per view and ``scan_report`` for the whole."""
    if not observations:
        raise ValueError("no view to fit")
    settings = settings or FitSettings()
    scan = scan or ScanSettings()
    previous = torch.get_num_threads()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    try:
        return _fit_views(body, observations, settings, scan, progress, cancel)
    finally:
        torch.set_num_threads(previous)


def _say(progress, fraction: float, text: str) -> None:
    if progress is not None:
        progress("fit", fraction, text)


def _fit_views(body, observations, settings, scan, progress, cancel) -> dict:
    start = time.perf_counter()
    fitter = BodyFitter(body, settings)
    probs = [PersonProblem(fitter, obs) for obs in observations]
    size = max(1, settings.group_size)
    metric = all(o.metric for o in observations)
    skeleton = settings.skeleton_steps if metric else settings.skeleton_steps_without_metric
    surface = settings.surface_steps if metric else settings.surface_steps_without_metric
    agreed = None
    for i in range(0, len(probs), size):
        chunk = probs[i:i + size]
        _say(progress, 0.7 * i / len(probs), f"fitting views {i + 1}-{i + len(chunk)} of {len(probs)}")
        start_closed_form(chunk, cancel)  # the views' starts in batched passes
        if agreed is not None:  # the views before agreed on a shape: start from it
            with torch.no_grad():
                for p in chunk:
                    p.shape_logit.copy_(agreed)
        tries = fitter._other_folds(chunk)  # a guessed limb fold tried both ways, as solver does
        group = Group([p for tried in tries for p in tried])
        group.run_lbfgs(skeleton, dense=False, cancel=cancel)
        group.run_lbfgs(surface, dense=True, rounds=scan.view_surface_rounds, shape=metric,
                        keep_history=metric, cancel=cancel)
        if len(group.problems) > len(chunk):
            chunk, _ = fitter._keep_best_folds(group, tries, ())
            probs[i:i + len(chunk)] = chunk
        agreed = _mean_shape(probs[:i + len(chunk)])
    rescued = _rescue(fitter, probs, agreed, skeleton, surface, metric, scan.outlier, cancel) \
        if len(probs) > 2 else []
    per_view = time.perf_counter() - start
    _say(progress, 0.7, f"one shape for {len(probs)} views")
    shared = agreed.clone().requires_grad_(True)
    for p in probs:
        p.shape_logit = shared  # the same leaf: its gradient sums every view's
    group = Group(probs)
    group.terms = GroupTerms(probs)
    borrowed = _borrow_poses(group, scan.neighbours) if len(probs) > 1 else []
    params = [shared] + [v for p in probs for g in p._params(True) for v in g["params"] if v is not shared]
    thickness = None
    if scan.thickness and metric and any(p.obs.covering.any() for p in probs):
        classes = int(group.terms.part_dt.shape[1])
        thickness = torch.full((classes,), 0.01, dtype=probs[0].dt, device=probs[0].dev, requires_grad=True)
        group.terms = _ScanTerms(probs, thickness, scan.thickness)
        params.append(thickness)
    evaluations = 0
    for r in range(scan.joint_rounds):
        if cancel is not None:
            cancel.check()
        group._rest = {}
        group.pick_correspondences()
        opt = torch.optim.LBFGS(params, lr=1.0, max_iter=scan.joint_steps, history_size=20,
                                line_search_fn="strong_wolfe", tolerance_grad=1e-6, tolerance_change=1e-9)

        def closure():
            nonlocal evaluations
            if cancel is not None:
                cancel.check()
            evaluations += 1
            opt.zero_grad()
            loss = group.losses(True).sum() + _consistency(probs, scan.consistency) + _agreement(probs, scan.agreement)
            if thickness is not None:  # weakly towards 1 cm: a part the views barely see stays there
                loss = loss + scan.thickness_prior * ((thickness.abs() * 100.0 - 1.0) ** 2).sum()
            loss.backward()
            return loss
        opt.step(closure)
        _say(progress, 0.7 + 0.3 * (r + 1) / scan.joint_rounds, f"joint round {r + 1} of {scan.joint_rounds}")
    seconds = time.perf_counter() - start
    fits = [fitter._person_fit(p, {"scan": evaluations}, seconds / len(probs)) for p in probs]
    worn = None if thickness is None else _part_thickness(thickness, probs[0].obs, group.terms)
    for f in fits:  # the add-on's clothed layer blends it with what each view measures
        f.report["clothing_thickness_m"] = worn
    arrays = body.evaluate(np.stack([f.rotvecs for f in fits]), np.stack([f.phenotypes for f in fits]),
                           np.stack([f.placement for f in fits]))
    arrays["person_ids"] = np.arange(1, len(fits) + 1, dtype=np.int32)
    arrays["joints_estimated"] = np.stack([f.joints_estimated for f in fits])
    arrays["reports"] = np.array([json.dumps(f.report) for f in fits])
    arrays["scan_report"] = np.array(json.dumps({
        "views": len(probs), "seconds": round(seconds, 3), "per_view_seconds": round(per_view, 3),
        "joint_evaluations": evaluations, "poses_borrowed": borrowed,
        "clothing_thickness_m": worn, "views_refitted": rescued, "phenotypes": [round(float(x), 4) for x in fits[0].phenotypes]}))
    _say(progress, 1.0, f"one body from {len(probs)} views")
    return arrays


_HEAD = BODY_CLASSES.index("Face_Neck")


class _ScanTerms(GroupTerms):
    """The group's terms plus one clothing thickness per body part shared by every view: a
    covering point (clothing, hair) is pulled to its matched body point + that part's thickness
    along the point's normal (``GroupTerms.surface`` alone keeps the body only inside the clothes)."""

    def __init__(self, problems, thickness: torch.Tensor, weight: float):
        super().__init__(problems)
        self.thickness, self.thickness_weight = thickness, weight

    def surface(self, sample: torch.Tensor, v) -> torch.Tensor:
        loss = super().surface(sample, v)
        if not self.any_points:
            return loss
        cam = v.to_camera(sample)
        pts = self.points
        if self.relative:
            pts = rescaled_depth(pts, v.depth_scale[:, None], v.depth_shift[:, None])
        on = cam.gather(1, self.nn[..., None].expand(-1, -1, 3)) + self.offset
        signed = ((pts - on) * self.point_normals).sum(-1) * 100.0  # cm, > 0 outside the body
        part = self.sample_class.reshape(-1)[self.nn]  # [P,N] the matched body point's class
        tau = self.thickness.abs().clamp(max=0.05)[part] * 100.0  # abs: a clamp at 0 would hold a part there
        # Hair is no layer of one thickness (none on the face, centimetres on top): not the head's.
        covering = (self.covering & (part != _HEAD)).to(signed.dtype) * self.matched
        # In place of GroupTerms' weak pull of the body out to the clothes (0.05 x charbonnier of
        # the gap, which draws every view's covered limbs towards its camera: the views cannot
        # tell a limb nearer its camera from thinner clothes), the pull to body + thickness.
        term = (charbonnier(signed - tau, 1.0) * self.thickness_weight - 0.05 * charbonnier(signed, 1.0)) * covering
        return loss + self.wt["surface"] * term.sum(-1) / self.matched_n


def _part_thickness(thickness: torch.Tensor, obs, terms) -> dict:
    """{class id: metres} of the parts some covering point was matched to."""
    with torch.no_grad():
        part = terms.sample_class.reshape(-1)[terms.nn]
        used = torch.unique(part[terms.covering & (terms.matched > 0) & (part != _HEAD)]).tolist()
        return {BODY_CLASSES[int(c)]: round(float(thickness[c].abs().clamp(max=0.05)), 4) for c in used}


def _mean_shape(probs: list) -> torch.Tensor:
    """The views' shape logits [1,6] averaged, each weighted by its observed surface points
    (a view that sees more of the body says more about its shape)."""
    with torch.no_grad():
        w = torch.tensor([max(len(p.obs.points), 1) for p in probs], dtype=probs[0].dt, device=probs[0].dev)
        logits = torch.cat([p.shape_logit.detach() for p in probs])
        return (w[:, None] * logits).sum(0, keepdim=True) / w.sum()


def _borrow_poses(group: Group, neighbours: int) -> list:
    """Warm starts from view to view: each view's limbs tried in the poses of the ``neighbours``
    views each side (its own placement kept), the lowest dense loss kept. A profile view folds an
    arm the wrong way as easily as the right (the depth cannot tell); its neighbours, seen more
    from the front or back, can. Returns [(view, the view whose pose it took)]."""
    probs = group.problems
    n = len(probs)
    own = [(p.pose_free.detach().clone(), p.pose_fingers.detach().clone()) for p in probs]
    offsets = [0] + [s * d for d in range(1, neighbours + 1) for s in (-1, 1) if d < n]
    best = [(float("inf"), 0)] * n
    with torch.no_grad():
        for off in dict.fromkeys(o % n for o in offsets):  # each distinct shift once
            for k, p in enumerate(probs):
                free, fingers = own[(k + off) % n]
                p.pose_free.copy_(free)
                p.pose_fingers.copy_(fingers)
            group._rest = {}
            group.pick_correspondences()
            for k, loss in enumerate(group.losses(True).tolist()):
                if loss < best[k][0] - 1e-9:
                    best[k] = (loss, off)
        for k, p in enumerate(probs):
            free, fingers = own[(k + best[k][1]) % n]
            p.pose_free.copy_(free)
            p.pose_fingers.copy_(fingers)
    group._rest = {}
    return [(k, (k + off) % n) for k, (_loss, off) in enumerate(best) if off]


def _rescue(fitter, probs: list, agreed, skeleton: int, surface: int, metric: bool, outlier: float, cancel) -> list:
    """Views whose fit is an outlier (surface residual over ``outlier`` x the median) fitted again
    from their neighbours: the closed-form start turns a profile too little (by 15-20 degrees on
    the ground truth, the torso seen edge-on), and the arms then fold to make up for it. Starts:
    the turn of the view before, of the view after and halfway between (the views of a
    turn-around are in order), each with that neighbour's pose and the shape the views agreed
    on; the view's own translation. All starts go through the skeleton stage and one surface
    round in one group; a start is kept if its residual beats the view's own. Returns the views
    refitted."""
    from .body_model import rotvec_to_matrix

    n = len(probs)
    res = np.array([p.surface_residual() for p in probs])
    bad = [k for k in range(n) if res[k] > outlier * np.nanmedian(res)] if np.isfinite(res).any() else []
    if not bad:
        return []
    with torch.no_grad():
        turns = [rotvec_to_matrix(p.root_rot) @ p.r0 for p in probs]
        places = [p.placement()[1] for p in probs]
    starts, owners = [], []
    for k in bad:
        a, b = (k - 1) % n, (k + 1) % n
        for rot, pose_of in ((turns[a], probs[a]), (turns[b], probs[b]), (_halfway(turns[a], turns[b]), probs[a])):
            c = PersonProblem(fitter, probs[k].obs)
            c.init_closed_form()
            with torch.no_grad():
                c.shape_logit.copy_(agreed)
                c.pose_free.copy_(pose_of.pose_free)
                c.pose_fingers.copy_(pose_of.pose_fingers)
                c.root_rot.zero_()
                c.root_t.zero_()
            c.r0, c.t0 = rot.detach().clone(), places[k].detach().clone()
            starts.append(c)
            owners.append(k)
    group = Group(starts)
    group.run_lbfgs(skeleton, dense=False, cancel=cancel)
    group.run_lbfgs(surface, dense=True, rounds=1, shape=metric, keep_history=metric, cancel=cancel)
    best = {k: (res[k], None) for k in bad}
    for c, k in zip(starts, owners):
        r = c.surface_residual()
        if r < best[k][0]:
            best[k] = (r, c)
    for k, (_r, c) in best.items():
        if c is not None:
            probs[k] = c
    return [k for k, (_r, c) in best.items() if c is not None]


def _halfway(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The rotation halfway from ``a`` to ``b`` (3x3), on the shorter arc."""
    from .body_model import rotvec_to_matrix

    rel = (b @ a.T).double()
    angle = torch.arccos(((torch.trace(rel) - 1) / 2).clamp(-1, 1))
    if angle < 1e-6:
        return a
    axis = torch.stack([rel[2, 1] - rel[1, 2], rel[0, 2] - rel[2, 0], rel[1, 0] - rel[0, 1]]) / (2 * torch.sin(angle))
    return (rotvec_to_matrix((axis * angle / 2).to(a.dtype)) @ a)


def _agreement(probs: list, weight: float) -> torch.Tensor | float:
    """``weight`` x the squared differences of every view's free rotations from their mean over
    the views (a scalar)."""
    if not weight or len(probs) < 2:
        return 0.0
    free = torch.stack([p.pose_free for p in probs])
    return weight * ((free - free.mean(0, keepdim=True)) ** 2).sum()


def _consistency(probs: list, weight: float) -> torch.Tensor | float:
    """``weight`` x the squared differences of consecutive views' free rotations (a scalar)."""
    if not weight or len(probs) < 2:
        return 0.0
    free = torch.stack([p.pose_free for p in probs])
    return weight * ((free[1:] - free[:-1]) ** 2).sum()
