# SPDX-License-Identifier: GPL-3.0-or-later
"""The people of a photo fitted together (inference_server/fit/group.py): each keeps its own
optimiser, their evaluations are batched, and the answer is each one's own."""

import threading

import numpy as np
import pytest

import gt_cases

pytestmark = [pytest.mark.slow, pytest.mark.torch, pytest.mark.anny]


@pytest.fixture(scope="module")
def two_people():
    return gt_cases.case("two_people")


def _fit(body, given, **settings):
    from inference_server.fit.solver import FitSettings

    out, _maps, bodies, _seconds = gt_cases.fit_case(body, "two_people", FitSettings(**settings), given=given)
    return out, bodies


def test_people_fitted_together_get_their_own_answers(body, two_people):
    import scoring
    from inference_server.fit.correspondences import JOINT_NAMES

    together, bodies = _fit(body, two_people)
    alone, _ = _fit(body, two_people, group_size=1)
    again, _ = _fit(body, two_people)
    assert together["person_ids"].tolist() == [1, 2]
    for key in ("vertices", "phenotypes", "placement"):  # deterministic, threads or not
        assert np.array_equal(together[key], again[key]), key
    for i, truth in enumerate(bodies):
        joints = {n: together["joints"][i][j] for j, n in enumerate(JOINT_NAMES)}
        assert scoring.joint_errors(joints, truth.joints, scoring.LIMB_JOINTS).mean() < 0.012
        # The same optimisation as alone, only its arithmetic batched: the paths drift apart by
        # float rounding (1.1 and 2.5 mm on average here), not by method.
        shift = np.linalg.norm(together["joints"][i] - alone["joints"][i], axis=-1)
        assert shift.mean() < 0.006, shift.mean()


def test_cancelling_a_group_stops_every_person(body, two_people):
    from inference_server.dataplane.base import Cancelled, CancelToken

    class CancelAfter(CancelToken):
        def __init__(self, calls):
            super().__init__()
            self.calls = calls

        def check(self):
            self.calls -= 1
            if self.calls <= 0:
                self.cancel()
            super().check()

    from inference_server.fit.solver import fit_people

    obs = gt_cases.observations(two_people[0])
    before = threading.active_count()
    with pytest.raises(Cancelled):
        fit_people(body, obs, cancel=CancelAfter(30))
    assert threading.active_count() == before  # no optimiser thread left waiting


def test_the_baseline_times_each_person_from_its_own_start(body, two_people):
    """The benchmark's plain baseline runs people one after another: each one's clock starts
    with it (a shared clock charged person 2 with person 1's run)."""
    seen = []

    def monitor(pid, steps, seconds, joints, px):
        seen.append((pid, steps, seconds))
        return False

    _fit(body, two_people, plain=True, plain_steps=10, plain_monitor=monitor)
    first = {(pid, steps): sec for pid, steps, sec in seen}
    assert sorted(first) == [(1, 5), (1, 10), (2, 5), (2, 10)]
    assert first[(2, 5)] < first[(1, 10)]  # half a run, not a run and a half


@pytest.mark.parametrize("depth", ["metric", "relative", "none"])
def test_a_persons_terms_in_a_group_are_its_terms_alone(body, two_people, depth):
    """The terms are batched over the people, padded where they differ (this scene's two have
    different numbers of points and pixels): each person's loss and gradients must be what
    they are with that person alone."""
    import scene_variants
    import torch

    from inference_server.fit.group import Group
    from inference_server.fit.problem import PersonProblem
    from inference_server.fit.solver import BodyFitter
    from inference_server.fit.terms import GroupTerms

    maps = {"metric": two_people[0], "relative": scene_variants.relative_depth(two_people[0]),
            "none": scene_variants.without_depth(two_people[0])}[depth]
    fitter = BodyFitter(body)
    problems = [PersonProblem(fitter, o) for o in gt_cases.observations(maps)]
    for p in problems:
        p.init_closed_form()
        with torch.no_grad():  # away from the start, where some terms are flat
            p.pose_free.add_(0.02)
            p.shape_logit.add_(0.1)
    assert len(problems[0].points) != len(problems[1].points) or depth == "none"

    def evaluate(group, dense, shape):
        group.terms = GroupTerms(group.problems)
        group._rest = {}
        if dense:
            group.pick_correspondences()
        variables = [v for p in group.problems for v in (p.pose_free, p.shape_logit, p.root_t, p.log_depth_scale)]
        for v in variables:
            v.grad = None
        losses = group.losses(dense, with_shape=shape)
        losses.sum().backward()
        return losses.detach(), [v.grad.clone() if v.grad is not None else torch.zeros_like(v) for v in variables]

    for dense, shape in ((False, True), (True, False), (True, True)):  # skeleton, surface, shape round
        together, grads = evaluate(Group(problems), dense, shape)
        for i, p in enumerate(problems):
            alone, own = evaluate(Group([p]), dense, shape)
            assert torch.allclose(together[i], alone[0], rtol=1e-5), (dense, shape, i)
            for a, b in zip(grads[4 * i:4 * i + 4], own):
                # float32 rounding of batched products, amplified where the gradient's terms cancel
                assert torch.allclose(a, b, rtol=1e-4, atol=1e-3 * float(b.abs().max()) + 1e-7), (dense, shape, i)


def test_surface_rounds_keep_their_curvature_history_with_metric_depth(body, body_model_scene, monkeypatch):
    """With metric depth each person's L-BFGS goes on from one surface round to the next, its
    curvature pairs kept across the rounds' new matches; without metric depth each round starts
    afresh (converging further there lets the depth scale drift)."""
    import scene_variants

    from inference_server.fit import group as group_module
    from inference_server.fit.solver import FitSettings

    made = []
    make = group_module._lbfgs

    def counted(params, iterations):
        made.append((make(params, iterations), iterations))
        return made[-1][0]

    monkeypatch.setattr(group_module, "_lbfgs", counted)
    settings = FitSettings()
    scene = body_model_scene
    gt_cases.fit_case(body, "metric", settings, given=(scene.maps, scene.bodies))

    def iterations_run(optimiser):
        return optimiser.state[optimiser.param_groups[0]["params"][0]]["n_iter"]

    # one optimiser for the keypoint stage, one for all the surface rounds
    assert [n for _o, n in made] == [settings.skeleton_steps, settings.surface_steps]
    assert settings.surface_steps < iterations_run(made[1][0]) <= settings.surface_rounds * settings.surface_steps

    made.clear()
    gt_cases.fit_case(body, "no depth", settings, given=(scene_variants.without_depth(scene.maps), scene.bodies))
    rounds = [o for o, n in made if n == settings.surface_steps_without_metric]
    assert len(rounds) == settings.surface_rounds_without_metric  # a new optimiser per round
    assert all(iterations_run(o) <= settings.surface_steps_without_metric for o in rounds)


def test_a_groups_start_is_each_persons_start_in_batched_passes(body, two_people):
    """group_start.start_closed_form starts everyone together: each person's size, placement and
    limbs as its own init_closed_form gives them (float32 batching apart), with the skeletons
    posed once per step for the group, not once per person: on a GPU each operation is a launch,
    and person by person the start was half of a batch's fit (docs/performance.md)."""
    import torch

    from inference_server.fit.group_start import start_closed_form
    from inference_server.fit.problem import PersonProblem
    from inference_server.fit.solver import BodyFitter, FitSettings

    class Count(torch.utils._python_dispatch.TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    people = gt_cases.observations(two_people[0]) * 3  # six: two different people, three times
    fitter = BodyFitter(body, FitSettings())
    alone = [PersonProblem(fitter, o) for o in people]
    with Count():
        alone[0].init_closed_form()
    one = Count.n
    for p in alone[1:]:
        p.init_closed_form()
    together = [PersonProblem(fitter, o) for o in people]
    Count.n = 0
    with Count():
        start_closed_form(together)
    assert Count.n < 2 * one, (Count.n, one)  # six people for less than two people's operations
    for a, b in zip(alone, together):
        for k in ("pose_free", "shape_logit", "r0", "t0", "log_depth_scale"):
            assert torch.allclose(getattr(a, k), getattr(b, k), atol=1e-5), k
        assert a.folds == b.folds
    assert not torch.allclose(together[0].pose_free, together[1].pose_free)  # each its own limbs


def test_a_groups_surface_matches_are_each_persons_own_with_the_bodies_posed_once(body, two_people):
    """Group.pick_correspondences poses the whole bodies of the group in one pass, then matches
    each person's points as PersonProblem.pick_correspondences does alone."""
    import torch

    from inference_server.fit.group import Group
    from inference_server.fit.group_start import start_closed_form
    from inference_server.fit.problem import PersonProblem
    from inference_server.fit.solver import BodyFitter, FitSettings
    from inference_server.fit.terms import GroupTerms

    calls = []
    people = gt_cases.observations(two_people[0]) * 2
    fitter = BodyFitter(body, FitSettings())
    probs = [PersonProblem(fitter, o) for o in people]
    start_closed_form(probs)
    group = Group(probs)
    group.terms = GroupTerms(probs)  # as run_lbfgs sets them before a round
    full = body.full
    body.full = lambda *a, **k: calls.append(len(a[0])) or full(*a, **k)
    try:
        group.pick_correspondences()
    finally:
        del body.full
    assert calls == [4]  # one pass for the four people
    for p in probs:
        alone = PersonProblem(fitter, p.obs)
        for k in ("pose_free", "shape_logit", "root_rot", "root_t"):
            getattr(alone, k).data.copy_(getattr(p, k))
        alone.r0, alone.t0 = p.r0, p.t0
        alone.pick_correspondences()
        # float32 batching moves the vertices by ~1e-6 m: only near-ties (~1 %) match otherwise
        gap = (alone._offset - p._offset).norm(dim=-1)
        for same in (alone._nn == p._nn, alone._cover_nn == p._cover_nn, gap < 1e-4):
            assert same.float().mean() > 0.97
