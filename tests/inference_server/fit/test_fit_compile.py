# SPDX-License-Identifier: GPL-3.0-or-later
"""The fit's evaluation compiled (FitSettings.compile, group._body_pass).

What compiling it (and, on a GPU, capturing it in one graph) needs is an evaluation without host
reads or data-dependent shapes: torch's tracer proves that here, cheaply, for every stage and
kind of depth. Then one real compiled fit (torch.compile and its C++ compiler, minutes of
compiling on two cores) must give the eager fit's answer."""

import dataclasses

import numpy as np
import pytest

import gt_cases

pytestmark = [pytest.mark.slow, pytest.mark.torch, pytest.mark.anny]


@pytest.mark.parametrize("name", ["two_people", "relative_depth", "no_depth"])
def test_every_stage_evaluates_as_one_graph(body, name):
    import torch
    import torch._dynamo

    from inference_server.fit.group import _body_pass
    from inference_server.fit.terms import GroupTerms

    group = gt_cases.started_group(body, gt_cases.case(name)[0])
    for dense, shape in ((False, True), (True, False), (True, True)):  # skeleton, surface, shape round
        group._rest = {}
        group.terms = GroupTerms(group.problems)
        if dense:  # the round's correspondences, picked eagerly as run_lbfgs does
            group.pick_correspondences()
        rest = None if shape else group.rest(dense)
        torch._dynamo.reset()
        seen = torch._dynamo.explain(_body_pass)(group, dense, rest)
        assert seen.graph_break_count == 0 and seen.graph_count == 1, \
            (name, dense, shape, [b.reason for b in seen.break_reasons])


def test_a_compiled_fit_gives_the_eager_answer(body, tmp_path_factory, monkeypatch):
    import scoring
    from inference_server.fit.correspondences import JOINT_NAMES
    from inference_server.fit.group import compiled_for
    from inference_server.fit.solver import FitSettings

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("fit_compile")))
    given = gt_cases.case("clean")
    group = gt_cases.observations(given[0])
    assert not compiled_for(group)
    # The skeleton stage only: compiling is minutes per graph on two cores, and the surface
    # stage's graph is proven compilable (one graph, no breaks) by the test above.
    stage = {"surface_rounds": 0}
    eager, _maps, bodies, _ = gt_cases.fit_case(body, "clean", FitSettings(**stage), given=given)
    compiled, *_ = gt_cases.fit_case(body, "clean", FitSettings(compile=True, **stage), given=given)
    again, *_ = gt_cases.fit_case(body, "clean", FitSettings(compile=True, **stage), given=given)
    assert compiled_for(group)  # the progress stops announcing a compile
    assert not compiled_for([dataclasses.replace(o, metric=False) for o in group])  # relative depth: its own graph
    assert np.array_equal(compiled["vertices"], again["vertices"])  # deterministic once compiled
    joints = {n: compiled["joints"][0][j] for j, n in enumerate(JOINT_NAMES)}
    assert scoring.joint_errors(joints, bodies[0].joints, scoring.LIMB_JOINTS).mean() < 0.01
    # The same optimisation with fused arithmetic: the paths drift apart by float rounding only
    # (about 1 mm of joints here), not by method.
    shift = np.linalg.norm(compiled["joints"][0] - eager["joints"][0], axis=-1)
    assert shift.mean() < 0.005, shift.mean()


def test_a_machine_without_a_compiler_gets_a_clear_error(body, tmp_path, monkeypatch):
    import torch._dynamo
    import torch._inductor.config

    from inference_server.fit.group import CompileFailed
    from inference_server.fit.solver import FitSettings

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # nothing compiled to reuse
    monkeypatch.setattr(torch._inductor.config.cpp, "cxx", (str(tmp_path / "no-such-c++"),))
    torch._dynamo.reset()
    try:
        with pytest.raises(CompileFailed, match="needs a C\\+\\+ compiler.*without --fit-compile"):
            gt_cases.fit_case(body, "clean", FitSettings(compile=True))
    finally:
        torch._dynamo.reset()
