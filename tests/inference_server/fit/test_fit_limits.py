# SPDX-License-Identifier: GPL-3.0-or-later
"""Knees and elbows straighten fully and no further (inference_server/fit/limits.py)."""

import numpy as np
import pytest
import torch

from inference_server.fit.bones import BODY_BONES, HINGES
from inference_server.fit.limits import _SLACK_DEG, hinge_cosines, hinge_floors, hinge_penalty, hinge_rows

pytestmark = [pytest.mark.torch, pytest.mark.anny]


def _angles_deg(body, phen, turns):
    """[N, hinges] each hinge's angle (degrees, 180 = straight) with the hinges turned by
    ``turns`` [N, hinges] (rad) about X, from the full pass (mesh regressor), not the skeleton
    pass the floors were measured with."""
    turns = np.atleast_2d(turns)
    rot = torch.zeros((len(turns), len(body.bone_names), 3))
    rot[:, [body.bone_index[b] for b in HINGES], 0] = torch.as_tensor(turns, dtype=torch.float32)
    phen = torch.as_tensor(phen, dtype=torch.float32).expand(len(turns), -1)
    joints = body.full(phen, rot)["joints"].double().numpy()
    return np.degrees(np.arccos(np.clip(hinge_cosines(joints), -1, 1)))


# phenotypes: gender, age, muscle, weight, height, proportions
@pytest.mark.parametrize("phen", [[0.5] * 6, [0.0, 0.5, 0.6, 0.85, 0.8, 0.5], [0.5, 0.15, 0.5, 0.5, 0.5, 0.5]],
                         ids=["average", "heavy_tall", "child"])
def test_every_body_straightens_each_hinge_fully_and_little_further(body, phen):
    floors = np.degrees(hinge_floors(body).double().numpy())
    slack = np.array([_SLACK_DEG[b.split(".")[0]] for b in HINGES])
    sweep = np.arange(-80.0, 20.0, 0.25)
    angles = _angles_deg(body, phen, np.radians(sweep)[:, None].repeat(len(HINGES), 1))
    straight = sweep[angles.argmax(0)]  # this body's straightest turn (about X alone: 177-179 deg)
    assert np.all(angles.max(0) > 176.0)
    # The floors are measured on the average body; a knee's straight turn moves with the shape
    # (-12 degrees for a child, -5 heavy, -8 average), an elbow's by about 2: each body can
    # straighten to within 1.5 degrees, and go past straight by at most 3.5 more than the slack.
    assert np.all(floors <= straight + 1.5), (floors, straight)
    assert np.all(straight - floors <= slack + 3.5), (floors, straight)
    # anny's rest is bent (knees a little, elbows a lot): one limit for both cannot be right
    rest = _angles_deg(body, phen, np.zeros(len(HINGES)))[0]
    assert np.all(rest[:2] < 176) and np.all(rest[2:] < 150)


def test_the_penalty_holds_hyperextension_only(body):
    floors = hinge_floors(body)
    rows = torch.tensor(hinge_rows())
    free = torch.zeros((3, len(BODY_BONES), 3))
    free[0, rows, 0] = floors + 0.01  # straight, or just past it by less than the slack
    free[1, rows, 0] = 2.0  # fully flexed
    free[2, rows, 0] = floors - 0.2  # bent backwards
    cost = hinge_penalty(free, rows, floors)
    assert cost[0] == 0 and cost[1] == 0
    assert cost[2] == pytest.approx(20.0 * 4 * 0.2 ** 2, rel=1e-4)
    free[2, rows, 1:] = 1.0  # twist and sideways swing are other priors' business
    assert hinge_penalty(free, rows, floors)[2] == pytest.approx(float(cost[2]), rel=1e-6)
