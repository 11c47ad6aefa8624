# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/learn_pose_prior.py on a tiny ASF/AMC written here (no mocap download): the
parser, the forward kinematics, the features and the mixture's EM."""

import numpy as np
import pytest
from benchmark_modules import benchmark_module

pytestmark = [pytest.mark.torch]


@pytest.fixture(scope="module")
def learn():
    with benchmark_module("learn_pose_prior") as module:
        yield module


def _bone(name, direction, length, axis=(0, 0, 0), dof=""):
    return (f"  begin\n     name {name}\n     direction {' '.join(map(str, direction))}\n"
            f"     length {length}\n     axis {' '.join(map(str, axis))} XYZ\n"
            + (f"    dof {dof}\n" if dof else "") + "  end\n")


# A stick figure, Y up, facing +Z: its left side at +X. Thighs and shins 4 long, arms 3.
_BONES = [("lhipjoint", (1, 0, 0), 1), ("lfemur", (0, -1, 0), 4, (0, 0, 0), "rx ry rz"),
          ("ltibia", (0, -1, 0), 4, (0, 0, 0), "rx"),
          ("rhipjoint", (-1, 0, 0), 1), ("rfemur", (0, -1, 0), 4, (0, 0, 0), "rx ry rz"),
          ("rtibia", (0, -1, 0), 4, (0, 0, 0), "rx"),
          ("lowerback", (0, 1, 0), 3), ("thorax", (0, 1, 0), 2),
          ("lclavicle", (1, 0, 0), 1.5), ("lhumerus", (0, -1, 0), 3, (0, 0, 30), "rx ry rz"),
          ("lradius", (0, -1, 0), 3, (0, 0, 30), "rx"),
          ("rclavicle", (-1, 0, 0), 1.5), ("rhumerus", (0, -1, 0), 3, (0, 0, -30), "rx ry rz"),
          ("rradius", (0, -1, 0), 3, (0, 0, -30), "rx")]
ASF = (":version 1.10\n:units\n  length 1\n  angle deg\n:root\n   order TX TY TZ RX RY RZ\n"
       "   axis XYZ\n   position 0 0 0\n   orientation 0 0 0\n:bonedata\n"
       + "".join(_bone(*b) for b in _BONES)
       + ":hierarchy\n  begin\n    root lhipjoint rhipjoint lowerback\n    lhipjoint lfemur\n"
         "    lfemur ltibia\n    rhipjoint rfemur\n    rfemur rtibia\n    lowerback thorax\n"
         "    thorax lclavicle rclavicle\n    lclavicle lhumerus\n    lhumerus lradius\n"
         "    rclavicle rhumerus\n    rhumerus rradius\n  end\n")
# Frame 1: standing. Frame 2: turned 90 degrees about Y, left thigh raised forwards 90 degrees
# (about X, negative: towards +Z) and its knee bent 90 (shin straight down again).
AMC = (":FULLY-SPECIFIED\n:DEGREES\n1\nroot 0 10 0 0 0 0\nlfemur 0 0 0\nltibia 0\nrfemur 0 0 0\n"
       "rtibia 0\nlhumerus 0 0 0\nlradius 0\nrhumerus 0 0 0\nrradius 0\n"
       "2\nroot 5 10 0 0 90 0\nlfemur -90 0 0\nltibia 90\nrfemur 0 0 0\nrtibia 0\nlhumerus 0 0 0\n"
       "lradius 0\nrhumerus 0 0 0\nrradius 0\n")


def test_parser_and_forward_kinematics(learn):
    skel = learn.parse_asf(ASF)
    frames = learn.parse_amc(AMC)
    assert len(frames) == 2 and skel["bones"]["lfemur"]["dof"] == ["rx", "ry", "rz"]
    stand = learn.joint_positions(skel, frames[0])
    np.testing.assert_allclose(stand["lhipjoint"], [1, 10, 0])
    np.testing.assert_allclose(stand["ltibia"], [1, 2, 0], atol=1e-12)  # ankle 8 below the hip
    np.testing.assert_allclose(stand["thorax"], [0, 15, 0])
    # the arm's axis (30 degrees about Z) only names its local frame: at rest it hangs straight
    np.testing.assert_allclose(stand["lradius"], [1.5, 9, 0], atol=1e-12)
    moved = learn.joint_positions(skel, frames[1])
    # root turned 90 degrees about Y: the body's +X (its left) now points at -Z
    np.testing.assert_allclose(moved["lhipjoint"], [5, 10, -1], atol=1e-12)
    # the left knee 4 forwards (the body's +Z, now +X), the shin hanging down from it
    np.testing.assert_allclose(moved["lfemur"], [9, 10, -1], atol=1e-12)
    np.testing.assert_allclose(moved["ltibia"], [9, 6, -1], atol=1e-12)


def test_features_of_the_mocap_and_a_mixture_fitted_to_them(learn):
    import torch

    from inference_server.fit.pose_prior import limb_features

    skel = learn.parse_asf(ASF)
    joints = learn.clip_joints(skel, learn.parse_amc(AMC), 1)  # [2,12,3]
    feats = limb_features(torch.as_tensor(joints)).numpy()  # [2,4,6]: R arm, L arm, R leg, L leg
    down = [0, 0, -1]
    np.testing.assert_allclose(feats[0, 2], down + down, atol=1e-12)  # standing legs hang down
    np.testing.assert_allclose(feats[1, 2], feats[0, 2], atol=1e-12)  # the right leg did not move
    thigh, shin = feats[1, 3, :3], feats[1, 3, 3:]
    assert abs(thigh[2]) < 1e-9 and abs(abs(thigh[1]) - 1) < 1e-9  # raised forwards: level
    np.testing.assert_allclose(shin, down, atol=1e-12)
    # the turn of the whole body changes no feature: the arms are the same in both frames
    np.testing.assert_allclose(feats[1, :2], feats[0, :2], atol=1e-12)

    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal([0, 0], 0.1, (300, 2)), rng.normal([3, 1], 0.2, (300, 2))])
    w, mu, cov = learn.fit_gmm(x, 2)
    order = np.argsort(mu[:, 0])
    np.testing.assert_allclose(w[order], [0.5, 0.5], atol=0.02)
    np.testing.assert_allclose(mu[order], [[0, 0], [3, 1]], atol=0.05)
    np.testing.assert_allclose(np.sqrt(cov[order][:, [0, 1], [0, 1]]), [[0.1, 0.1], [0.2, 0.2]], rtol=0.2)
