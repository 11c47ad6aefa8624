# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit's solver knobs (``FitSettings``): each stage's iterations, the terms' weights,
groups and fold tries, with why each default is what it is. solver.py runs the stages with them
(and re-exports the class: ``from .solver import FitSettings`` is how callers name it); the
server's own fit settings (device, compile) are settings.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class FitSettings:
    # L-BFGS iterations of the skeleton stage, shape free from the start (holding the shape
    # while the pose settled was cheaper but got stuck: worse joints and height on the ground
    # truth, a very tall body 2.6 cm short). 30, not 45, since the surface stage frees the shape
    # too: the same table, 0.1 s less, and over 20 noise draws every height within 2 cm.
    skeleton_steps: int = 30
    # Without metric depth the limb start has no depth to choose a fold by: the skeleton stage
    # has more to do (at 45, relative depth's joints max went 3.9 -> 4.8 cm).
    skeleton_steps_without_metric: int = 60
    # L-BFGS iterations per surface round, correspondences refreshed between rounds. With metric
    # depth the shape is free in them: held there (a shape-only round after), a body whose
    # keypoints leave its size open (a sitting person's thighs point at the camera) kept the
    # skeleton stage's size, 2.3 cm short, and leaning forward 3.4 cm; free, both within 1.7 cm
    # at 2 x 25 (with the surface matches of surface_match.py; docs/body_fit.md).
    # Without metric depth the size trades against the depth scale, so there the shape is held
    # (2 x 20: at 30 the scale drifted, relative depth's hidden side 1.69 -> 1.98 cm) and a round
    # on the shape and placement alone follows.
    # With metric depth, 3 x 17 rather than 2 x 25: the rounds keep their L-BFGS history
    # (Group.run_lbfgs), so a refresh no longer costs the curvature learnt; over 20 noise draws
    # (lifted depths then at 0.5) joints max 2.06 -> 1.99 cm on average, seed 4's height -2.07 ->
    # -1.92 cm.
    surface_steps: int = 17
    surface_rounds: int = 3
    surface_steps_without_metric: int = 20
    surface_rounds_without_metric: int = 2
    shape_steps: int = 10  # that round's L-BFGS iterations (without metric depth)
    # L-BFGS iterations of a last stage for people with the backend's own 3D pose (the offline
    # backend), the keypoints weighed "keypoints_polish" instead of "keypoints_with_world" (the
    # shape as polish_shape says): the stages before trade the keypoints against the pose prior,
    # the pseudo-depth and the silhouette, which all come from the same landmarks; the bones' 3D
    # directions (laid into the keypoints' planes) keep each limb's lean out of the image.
    # bench_real on its saved maps (refit_real.py): the bodies' 2D error 6.01 -> 5.33 % (the
    # backend's 4.68), the 3D frames 94.9 -> 94.4 mm (docs/body_fit.md "A last look at the
    # keypoints"). 0: none.
    polish_steps: int = 15
    # The shape free in that stage too (its girth held near the average by "girth_prior"): the
    # shoulders' and hips' width then follow the keypoints (the bodies' 2D error on the real
    # photos' saved maps 5.51 -> 5.39 %, 3D 93.4 -> 93.5 mm: docs/body_fit.md "Body shapes").
    polish_shape: bool = True
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
    # Limb folds the closed-form start had to guess (a joint over a hole in the depth: two
    # points on its ray fit its keypoint, start.limb_target), per person: each other fold is
    # taken through the skeleton and surface stages beside the first guess, batched with it,
    # and the lower loss kept (an elbow 20 cm in front of the body otherwise). Each try adds
    # about 0.35 s; at most this many per person, the folds farthest apart first. 0: none.
    # (Compiled, a try makes the group one larger: a size not yet compiled compiles first.)
    fold_tries: int = 2
    # Metres per unit of the translation's variable, with metric depth. L-BFGS's first step of
    # each round guesses one curvature for all variables, and per metre the translation's is
    # 100x a limb rotation's per radian (the loss's second derivative at a fitted body: ~1.5e4
    # against ~150; root rotation ~3e3, shape ~350). At 0.2 the fits end at a lower loss on
    # every benchmark case (sitting 0.58 -> 0.30) and nearer the truth (docs/body_fit.md).
    # Without metric depth: metres (the distance trades with the size there, and a freer one
    # made the no-depth fit worse: at 0.25 its hidden side went 0.93 -> 1.67 cm).
    translation_unit: float = 0.2
    # torch threads while fitting: the fit's tensors are small, so extra threads buy little and
    # on a busy machine (a batch, the test suite, Blender) spinning threads made it 4x slower.
    threads: int | None = 1
    # Term weights (see problem.PersonProblem): keypoints are 1.
    # prior_seen: the pull to rest of a limb that a keypoint or its part shows. Light: a bent knee
    # or elbow pulled straight while its end is held by the keypoint asks for shorter bones, and
    # the shape gave them (fitted bodies came out 2-5 cm short). surface: the observed points are
    # the strongest dense cue (at 0.5 noisy keypoints pulled knees 5-9 cm off; at 4 about 2).
    # lift: the joints' pull to their lifted depths (in the surface stage x lift_dense), the seen
    # surface at the keypoint's pixel plus a joint radius guessed per kind of joint: a rough cue,
    # read where a noisy keypoint lands. At 0.5 it held the joints to those guesses against the
    # dense surface, which knows the depth better; at 0.25 the ground truth's joints max 1.21 ->
    # 1.11 cm on average, an elbow over a hole 4.18 -> 3.64 cm (docs/body_fit.md).
    # world: the bones' directions in the backend's own 3D pose (the offline backend's MediaPipe
    # world landmarks, blended with the learned lifting: observations.LIFT_SHARE; no Sapiens
    # backend gives one). bench_real's 12 scored 3D frames, PA-MPJPE: 102.4 mm at 1, 97.8 at 2,
    # 96.9 at 3 with one more frame above its input (docs/body_fit.md "A learned lifting").
    # pose_prior*: pose_prior.py, docs/body_fit.md "Pose prior".
    # girth_prior: muscle, weight and proportions (terms.HELD_PHENOTYPES) held near the average
    # where the depth is a guess (people with the backend's own 3D pose: the offline backend),
    # whose outline is the clothing's: bench_real's 41 real people, weight > 0.8 19 -> 0; ZJU's
    # one man in two frames 0.45 / 0.97 -> 0.51 / 0.53; proportions at either end 16 -> 0 (the
    # 3D frames 94.9 -> 92.3 mm, 2D 5.51 -> 5.62 %). Everywhere, the girth's cost the ground
    # truth's heavy and dressed rows up to 0.18 cm of hidden side and the portrait's height 0.6 cm
    # (docs/body_fit.md "Body shapes on real photos", "Proportions held too").
    weights: dict = field(default_factory=lambda: {
        "lift": 0.25, "lift_dense": 1.0, "prior": 1.0, "prior_seen": 0.03, "hinge": 1.0, "surface": 4.0,
        "inside": 0.5, "part": 0.2, "cover": 0.3, "world": 2.0,
        "pose_prior": 3.0, "pose_prior_unseen": 0.0, "world_in_plane": 1.0, "keypoints_with_world": 2.0,
        "keypoints_polish": 32.0, "girth_prior": 1.0})
    dtype: torch.dtype = torch.float32
    # torch.compile the evaluation (group._body_pass): on this CPU the skeleton stage's is
    # faster compiled, but the surface stage's with the shape free is not (a fit 0.99x as fast
    # for one person, 1.11x for two together), and the first fit of a process pays the
    # compiling (about 2 min with a cold cache, about 1 min warm): for batches of groups, not
    # for one photo (docs/body_fit.md).
    compile: bool = False
    # The solver of the stages: "lbfgs" (group.py: torch's L-BFGS per person, line search read
    # back at every evaluation), "graph" (graph_solver.py: fixed-length steps with a parallel
    # line search and no host reads, one CUDA graph replay per step on a GPU) or "auto": graph
    # on CUDA, lbfgs on the CPU (where graph's parallel line search costs its rows).
    solver: str = "auto"
