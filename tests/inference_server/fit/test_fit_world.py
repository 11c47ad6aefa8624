# SPDX-License-Identifier: GPL-3.0-or-later
"""The backend's own 3D pose (keypoints_3d: MediaPipe's world landmarks) as a term of the fit:
bone directions, which say whether a limb points towards the camera or away where the 2D
keypoints cannot."""

import numpy as np
import pytest

import gt_cases

pytestmark = [pytest.mark.slow, pytest.mark.torch, pytest.mark.anny]


def _keypoints_3d(bodies) -> np.ndarray:
    """[P,308,4]: the true joints relative to the hips, confidence 1 (as a backend would give)."""
    from inference_server.fit.correspondences import JOINT_KEYPOINT_INDEX, JOINT_NAMES

    k3 = np.full((len(bodies), 308, 4), np.nan)
    for i, b in enumerate(bodies):
        hips = (np.asarray(b.joints["left_hip"]) + np.asarray(b.joints["right_hip"])) / 2
        for j, name in enumerate(JOINT_NAMES):
            if name in b.joints:
                k3[i, JOINT_KEYPOINT_INDEX[j]] = [*(np.asarray(b.joints[name]) - hips), 1.0]
    return k3


@pytest.mark.parametrize("name", ["no_depth", "clean"])
def test_bone_directions_place_limbs_that_the_keypoints_leave_open(body, name):
    """Without depth, a limb's 2D keypoints fit it pointing towards the camera or away alike
    (joints max 9.7 cm); its bone directions settle which (3.8 cm measured). With metric depth
    (the pose turned onto the body first) they cost the clean scene nothing (0.52 -> 0.32 cm)."""
    from inference_server.fit.observations import observe
    from inference_server.fit.solver import fit_people

    maps, bodies = gt_cases.case(name)
    args = dict(mask=maps.mask, parts=maps.parts, part_names_in=maps.part_names, intrinsics=maps.intrinsics,
                keypoints=maps.keypoints, depth=maps.depth, pointmap=maps.pointmap, metric=maps.metric)
    rows = {}
    for label, k3 in (("without", None), ("with", _keypoints_3d(bodies))):
        obs = [observe(pid, keypoints_3d=k3, **args) for pid in maps.person_ids]
        assert (obs[0].world is not None) == (k3 is not None)
        rows[label] = gt_cases.score_case(body, fit_people(body, obs), bodies, name)[0]
    if name == "no_depth":
        assert rows["with"]["joint_max_cm"] < 5.0 and rows["without"]["joint_max_cm"] > 6.0, rows
    else:
        assert rows["with"]["joint_max_cm"] < 0.45 and rows["with"]["joint_mean_cm"] < 0.25, rows


def test_keypoints_3d_of_the_wrong_shape_or_too_few_joints():
    from inference_server.fit.observations import ObservationError, _world

    with pytest.raises(ObservationError, match=r"keypoints_3d must be \[P,308,4\]"):
        _world(np.zeros((1, 308, 3)), 1)
    few = np.full((1, 308, 4), np.nan)
    few[0, :3] = [0.0, 0.0, 0.0, 1.0]
    assert _world(few, 1) == (None, None)  # fewer than 4 joints: no 3D pose
    assert _world(np.zeros((1, 308, 4)), 2) == (None, None)  # no row for person 2
