# SPDX-License-Identifier: GPL-3.0-or-later
"""The closed-form start (start.py's arithmetic) for a group of people at once.

Each step evaluates every person's skeleton in one batched pass and reads it back once; the
per-person arithmetic (numpy) follows. Person by person, a start was ~5,400 small device
operations (init_limbs ~5,000 of them: a skeleton per limb), which on a GPU made the start half
of a batch of 32 people's fit (docs/performance.md, issue 36's third lease). The people are
problem.PersonProblem objects; their per-person init_* methods call these with one person.
"""

from __future__ import annotations

import numpy as np
import torch

from . import start
from .alignment import rotation_between
from .body_model import rotvec_to_matrix
from .bones import LIMB_CHAINS, START_SIZES
from .correspondences import JOINT_NAMES
from .tensor_ops import to_numpy64


def start_closed_form(problems: list, cancel=None) -> None:
    """PersonProblem.init_closed_form for ``problems`` together: size, placement, limbs, hands,
    and the depth scale where depth is relative."""
    init_sizes(problems)
    if cancel is not None:
        cancel.check()
    with torch.no_grad():
        rest = _skeletons(problems).joints
    for prob, joints in zip(problems, to_numpy64(rest)):
        prob._set_placement(*start.closed_form(prob.obs, joints))
    init_limbs(problems, [frozenset()] * len(problems))
    if cancel is not None:
        cancel.check()
    for prob in problems:
        prob.init_hands()
        if prob.obs.has_depth and not prob.obs.metric:
            prob._init_depth_scale()


def _skeletons(problems: list, phenotypes=None, repeat: int = 1):
    """The people's skeletons in one pass: each person's pose ``repeat`` times (rows person-major)
    with ``phenotypes`` [P*repeat,6] or their RestState (default: their own)."""
    body = problems[0].f.body
    rot = torch.cat([p.rotvecs() for p in problems]).repeat_interleave(repeat, 0)
    if phenotypes is None:
        phenotypes = torch.cat([p.phenotypes() for p in problems]).repeat_interleave(repeat, 0)
    return body.skeleton(phenotypes, rot)


def init_sizes(problems: list) -> None:
    """PersonProblem.init_size for the people with metric depth, their candidate bodies
    (START_SIZES) posed in one pass."""
    metric = [p for p in problems if p.obs.metric]
    if not metric:
        return
    p0 = metric[0]
    sizes = np.full((len(START_SIZES), 6), 0.5)
    sizes[:, 1] = [a for a, _h in START_SIZES]
    sizes[:, 4] = [h for _a, h in START_SIZES]
    ph = torch.as_tensor(sizes, dtype=p0.dt, device=p0.dev)
    with torch.no_grad():
        joints = _skeletons(metric, ph.repeat(len(metric), 1), repeat=len(START_SIZES)).joints
    joints = to_numpy64(joints).reshape(len(metric), len(START_SIZES), *joints.shape[1:])
    for prob, cands in zip(metric, joints):
        best = start.best_size(prob.obs, cands, START_SIZES.index((0.5, 0.5)))
        if best is not None:
            # Not at a bound of the range: the tallest start is height 1, whose logit is infinite
            # (a 2.2 m person's fit went NaN from its first step), nor near one, where the
            # sigmoid's slope would hold the shape there.
            logit = torch.logit(ph[best:best + 1], eps=0.05) / prob.f.shape_scale
            prob.shape_logit.data.copy_(logit)


def init_limbs(problems: list, flips: list) -> None:
    """Arms and legs turned in closed form, upper bone then lower, so that each seen elbow,
    wrist, knee and ankle lies on its keypoint's ray (at the depth the pointmap gives where it
    gives one): the skeleton stage then starts with the limbs roughly in place, not from a
    standing pose that a bent arm is many iterations (and sometimes a wrong fold) away from.
    Where the fold was a guess (start.limb_target) the joint is noted in the person's ``folds``
    (the farthest apart first); the joints in its ``flips`` entry take the other fold."""
    import roma

    f = problems[0].f
    dev, dt = problems[0].dev, problems[0].dt
    names = {n: j for j, n in enumerate(JOINT_NAMES)}
    free = {int(b): k for k, b in enumerate(f._free)}
    for prob, flip in zip(problems, flips):
        prob.folds, prob.flipped = [], flip
    with torch.no_grad():  # the shapes hold here: their rest bodies once, not once per limb
        rest = f.body.rest_state(torch.cat([p.phenotypes() for p in problems]))
    for side, s in (("left", "L"), ("right", "R")):
        for stem, far, after in LIMB_CHAINS:
            bone = f.body.bone_index[f"{stem}.{s}"]
            k = free[bone]
            joint = names[f"{side}_{far}"]
            with torch.no_grad():
                placed = [p.placement() for p in problems]
                r = torch.stack([a for a, _t in placed])
                t = torch.stack([b for _r, b in placed])
                sk = _skeletons(problems, rest)
                rt = r.transpose(1, 2)
                head = to_numpy64((sk.bone_poses[:, bone, None, :3, 3] @ rt)[:, 0] + t)
                joints = to_numpy64(sk.joints @ rt + t[:, None])
                world = to_numpy64(sk.bone_poses[:, bone, :3, :3])
                local = to_numpy64(rotvec_to_matrix(torch.stack([p.pose_free[k] for p in problems]).double()))
                r64 = to_numpy64(r)
                turned, news = [], []
                for i, prob in enumerate(problems):
                    child = joints[i, joint]
                    end = None
                    if after:
                        nxt = names[f"{side}_{after}"]
                        end = (nxt, float(np.linalg.norm(joints[i, nxt] - child)))
                    forward = r64[i][:, 1] * -1.0 if stem == "upperleg01" else None  # anny faces -Y
                    target, other = start.limb_target(prob.obs, joint, head[i], float(np.linalg.norm(child - head[i])),
                                                      child, end, forward)
                    if other is not None:
                        prob.folds.append((abs(float(other[2] - target[2])), joint))
                        if joint in prob.flipped:
                            target = other
                    if target is None:
                        continue
                    turn = r64[i].T @ rotation_between(child - head[i], target - head[i]) @ r64[i]  # model frame
                    parent_part = world[i] @ local[i].T
                    turned.append(i)
                    news.append(parent_part.T @ turn @ world[i])
                if turned:
                    vecs = roma.rotmat_to_rotvec(torch.as_tensor(np.stack(news))).to(dev, dt)
                    for i, v in zip(turned, vecs):
                        problems[i].pose_free[k] = v
    for prob in problems:  # the folds farthest apart first: a wrong guess there costs the most
        prob.folds = [joint for _gap, joint in sorted(prob.folds, key=lambda g: -g[0])]
