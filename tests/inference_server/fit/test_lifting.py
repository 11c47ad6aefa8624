# SPDX-License-Identifier: GPL-3.0-or-later
"""The learned 2D-to-3D lifting (inference_server/fit/lifting.py): its numpy network against the
torch network it was learned as, its camera conventions, the shipped weights on a pose they
never saw, and how observations.py blends it into the backend's 3D pose."""

import sys
from pathlib import Path

import numpy as np
import pytest

from inference_server.fit import lifting
from inference_server.fit.alignment import similarity_onto

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

J = {n: i for i, n in enumerate(lifting.LIFT_JOINTS)}


def _standing(arm_out_deg: float = 10.0, knee_deg: float = 0.0) -> np.ndarray:
    """[12,3] metres, y down, z away, facing the camera (its left on the image's right): arms
    hanging ``arm_out_deg`` from the body, the right knee bent ``knee_deg`` forwards."""
    out = np.zeros((12, 3))
    a = np.radians(arm_out_deg)
    for side, s in (("right", -1.0), ("left", 1.0)):
        sh = np.array([0.19 * s, -0.50, 0.0])
        arm = np.array([np.sin(a) * s, np.cos(a), 0.0])
        out[J[f"{side}_shoulder"]] = sh
        out[J[f"{side}_elbow"]] = sh + 0.28 * arm
        out[J[f"{side}_wrist"]] = sh + 0.53 * arm
        hip = np.array([0.10 * s, 0.0, 0.0])
        out[J[f"{side}_hip"]] = hip
        out[J[f"{side}_knee"]] = hip + [0.0, 0.43, 0.0]
        out[J[f"{side}_ankle"]] = hip + [0.0, 0.85, 0.0]
    k = np.radians(knee_deg)
    knee = out[J["right_hip"]] + 0.43 * np.array([0.0, np.cos(k), -np.sin(k)])  # thigh forwards
    out[J["right_knee"]] = knee
    out[J["right_ankle"]] = knee + [0.0, 0.42, 0.0]
    return out


def _seen(xyz: np.ndarray, yaw_deg: float, at=(0.0, -0.2, 4.0), f: float = 1000.0):
    """(pixels [12,2], intrinsics, camera-frame joints [12,3]) of ``xyz`` turned ``yaw_deg`` about
    the vertical and placed at ``at``."""
    y = np.radians(yaw_deg)
    rot = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    cam = xyz @ rot.T + np.asarray(at)
    k = np.array([[f, 0, 640.0], [0, f, 480.0], [0, 0, 1]])
    uv = cam @ k.T
    return uv[:, :2] / uv[:, 2:], k, cam


def _pa(pred, truth) -> float:
    """Mean joint distance after a similarity alignment, in units of ``truth``'s spread."""
    truth = lifting.unit_spread(truth)
    return float(np.linalg.norm(similarity_onto(pred, truth) - truth, axis=1).mean())


def test_the_numpy_network_is_the_torch_network_it_was_learned_as(tmp_path):
    """A random network of the learning script's own architecture, written and read back: the
    numpy forward (what the server runs) equals torch's on the float16 weights."""
    torch = pytest.importorskip("torch")
    import learn_lifting

    torch.manual_seed(3)
    net = learn_lifting.network(hidden=16, blocks=2).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    path = tmp_path / "lift.json"
    lifting.write_arrays(path, learn_lifting.arrays_of(net, 2))
    with torch.no_grad():  # the torch network with the weights as stored (float16)
        for p in net.parameters():
            p.copy_(p.half().float())
    x = np.random.default_rng(0).normal(size=(5, 24)).astype(np.float32)
    mine = lifting.Lifter(lifting.read_arrays(path))(x)
    with torch.no_grad():
        theirs = net(torch.as_tensor(x)).numpy().reshape(5, 12, 3)
    assert np.abs(mine - theirs).max() < 1e-4 * max(1.0, np.abs(theirs).max())
    assert np.abs(theirs).max() > 0.1  # not a network that answers zeros


def test_the_training_views_are_turns_of_the_mocap_not_mirrors():
    """A mocap pose's views: the 2D inputs are the 3D targets projected (no mirror sneaks in
    between: a body whose handedness flips would teach the network a mirrored world)."""
    torch = pytest.importorskip("torch")
    import learn_lifting

    body = _standing(30.0, knee_deg=60.0) * np.array([1.0, -1.0, -1.0])  # the mocap's y up, z to the viewer
    gen = torch.Generator().manual_seed(0)
    x, y = learn_lifting.views(torch.as_tensor(np.repeat(body[None], 64, 0), dtype=torch.float32), 1.7, gen, noise=0.0)
    y = y.numpy().reshape(64, 12, 3)
    truth = lifting.unit_spread(_standing(30.0, knee_deg=60.0))
    # half the views are of the mirrored body (its sides exchanged: the right knee raised becomes
    # the left): a body too, not a reflection of this one
    mirrored = truth[list(lifting.MIRROR)] * np.array([-1.0, 1.0, 1.0])
    kinds = []
    for xi, yi in zip(x.numpy(), y):
        # the same body up to a turn (no reflection): aligned without mirroring, it fits exactly
        kinds.append(min((_pa(yi, t), i) for i, t in enumerate((truth, mirrored))))
        assert kinds[-1][0] < 1e-4
        # and the inputs are that body's perspective projection: their x order agrees with the
        # targets' (a mirror between them would reverse it)
        assert np.corrcoef(xi.reshape(12, 2)[:, 0], yi[:, 0])[0, 1] > 0.8
    assert 10 < sum(i for _, i in kinds) < 54  # both kinds drawn


def test_the_centring_turn_looks_at_the_hips():
    xyz = _standing()
    xy, k, cam = _seen(xyz, 0.0, at=(1.5, 0.3, 3.0))  # far off the optical axis
    uv, turn = lifting.centring_turn(xy, k)
    assert np.allclose(turn @ turn.T, np.eye(3), atol=1e-12) and np.linalg.det(turn) == pytest.approx(1.0)
    rays = np.c_[xy, np.ones(12)] @ np.linalg.inv(k).T
    c = rays[list(lifting.HIPS)].mean(0)
    assert np.allclose(turn @ (c / np.linalg.norm(c)), [0.0, 0.0, 1.0], atol=1e-12)  # the hips' ray on the axis
    assert np.abs(uv[list(lifting.HIPS)].mean(0)).max() < 1e-3
    # the turned camera sees the body as the turned joints project
    q = cam @ turn.T
    assert np.allclose(uv, q[:, :2] / q[:, 2:], atol=1e-9)
    xy0, k0, _ = _seen(xyz, 0.0, at=(0.0, 0.0, 3.0))  # already centred: no turn
    assert np.allclose(lifting.centring_turn(xy0, k0)[1], np.eye(3), atol=1e-9)


@pytest.mark.parametrize("yaw,arm,knee,limit", [(0.0, 10.0, 0.0, 0.15), (60.0, 10.0, 0.0, 0.18),
                                                (90.0, 10.0, 0.0, 0.25), (30.0, 10.0, 70.0, 0.15),
                                                (-70.0, 80.0, 0.0, 0.3)])
def test_the_shipped_network_lifts_poses_it_never_saw(yaw, arm, knee, limit):
    """Hand-built bodies (not mocap frames), seen from the front, turned, side-on, with a knee
    raised towards the camera and with an arm held out: the lifted joints lie within ``limit``
    of the body's spread of the truth after alignment (0.15 is about 5 cm on a standing adult;
    measured 0.10, 0.14, 0.21, 0.10, 0.28). Where the depth matters (turned bodies, the knee)
    they also beat the picture itself read flat (zero depth: 0.17, 0.35, 0.25)."""
    xyz = _standing(arm, knee)
    xy, k, cam = _seen(xyz, yaw)
    out = lifting.lift(xy, k)
    assert out.shape == (12, 3) and np.isfinite(out).all()
    err = _pa(out, cam)
    assert err < limit, err
    flat = _pa(np.c_[xy - xy.mean(0), np.zeros(12)], cam)
    if abs(yaw) >= 60 and arm < 45 or knee:
        assert err < flat - 0.03, (err, flat)
    if knee:
        # the knee comes towards the camera, not away: the depth a single photo cannot show
        hips = out[list(lifting.HIPS)].mean(0)
        assert out[J["right_knee"], 2] < hips[2] - 0.2


def _rolled(xy: np.ndarray, k: np.ndarray, deg: float) -> tuple[np.ndarray, np.ndarray]:
    """(pixels, rotation [3,3]) of the camera rolled ``deg`` about its optical axis: the picture
    turned about the principal point, camera-frame points turned about z alike."""
    r = lifting.roll_about_axis(np.radians(deg))
    return (xy - k[:2, 2]) @ r[:2, :2].T + k[:2, 2], r


@pytest.mark.parametrize("deg", [90.0, -90.0, 180.0, 45.0])
def test_a_person_lying_or_upside_down_is_lifted_as_one_standing(deg):
    """The network learned from level cameras (upright torsos in the picture). A person lying
    across the picture or upside down (or the camera on its side) is lifted as well as standing:
    the answer is the standing answer turned with the picture, not a pose the network guessed
    for an unfamiliar picture (unrolled, this body's error was 0.38 / 0.41 of its spread lying,
    0.53 upside down, 0.26 at 45 deg, against 0.13 standing)."""
    xyz = _standing(30.0, knee_deg=60.0)
    xy, k, cam = _seen(xyz, 30.0, at=(0.0, 0.0, 4.0))
    upright = lifting.lift(xy, k)
    turned_xy, r = _rolled(xy, k, deg)
    lying = lifting.lift(turned_xy, k)
    assert np.allclose(lying, upright @ r.T, atol=1e-4)  # the standing answer, turned with the picture
    assert _pa(lying, cam @ r.T) < 0.2
    roll = lifting.upright_roll(turned_xy) - lifting.upright_roll(xy)  # the picture's turn undone
    assert abs(np.angle(np.exp(1j * (roll + np.radians(deg))))) < 1e-6


def test_a_torso_seen_end_on_is_not_rolled():
    """Seen from straight above, the hips-to-shoulders line is a few pixels long and points
    anywhere: no roll is read from it; a torso across the picture is turned up."""
    xy, k, _ = _seen(_standing(), 0.0, at=(0.0, 0.0, 4.0))
    uv = xy - xy[list(lifting.HIPS)].mean(0)
    sh = [J["right_shoulder"], J["left_shoulder"]]
    uv[sh] = uv[sh] - uv[sh].mean(0) + [3.0, -3.0]  # the torso's picture 4 px long, leaning 45 deg
    assert lifting.upright_roll(uv) == 0.0
    uv[sh] += [30.0, -30.0]  # a longer torso leaning 45 deg: turned back up
    assert lifting.upright_roll(uv) == pytest.approx(-np.pi / 4, abs=1e-9)
    uv[sh] += [150.0, 33.0]  # lying, the head to the right
    assert lifting.upright_roll(uv) == pytest.approx(-np.pi / 2, abs=1e-9)


def test_lift_refuses_missing_joints_and_blend_moves_half_way():
    xy, k, cam = _seen(_standing(), 20.0)
    bad = xy.copy()
    bad[3] = np.nan
    assert lifting.lift(bad, k) is None and lifting.lift(xy[:5], k) is None
    assert lifting.lift(np.full((12, 2), 300.0), k) is None  # every joint on one pixel
    assert lifting.lift(xy[[0] * 12] + np.random.default_rng(0).normal(0, 0.1, (12, 2)), k) is None
    world = cam - cam[list(lifting.HIPS)].mean(0)
    other = lifting.unit_spread(_seen(_standing(60.0), 20.0)[2]) * 0.3  # another pose, another size
    assert np.allclose(lifting.blend(world, other, 0.0), world)
    one = lifting.blend(world, other, 1.0)
    assert np.allclose(one, similarity_onto(other, world))  # laid onto the world joints
    half = lifting.blend(world, other, 0.5)
    assert np.allclose(half, (world + one) / 2)


def test_observations_blend_the_lifted_pose_into_the_limbs_only(monkeypatch):
    """observe(): with keypoints_3d, the 12 limb joints of ``world`` move half way to the lifted
    pose; every other joint keeps the backend's 3D; LIFT_SHARE 0, or a limb keypoint missing,
    keeps all of it."""
    from inference_server.fit import observations
    from inference_server.fit.correspondences import JOINT_KEYPOINT_INDEX, JOINT_NAMES

    xyz = _standing(40.0, 30.0)
    xy, k, cam = _seen(xyz, 25.0, at=(0.0, 0.0, 4.0))
    h, w = 960, 1280
    kp = np.zeros((1, 308, 3))
    k3 = np.full((1, 308, 4), np.nan)
    for i, n in enumerate(lifting.LIFT_JOINTS):
        kp[0, JOINT_KEYPOINT_INDEX[JOINT_NAMES.index(n)]] = [*xy[i], 0.9]
        k3[0, JOINT_KEYPOINT_INDEX[JOINT_NAMES.index(n)]] = [*(cam[i] - cam[list(lifting.HIPS)].mean(0)), 0.9]
    nose = JOINT_NAMES.index("nose")
    k3[0, JOINT_KEYPOINT_INDEX[nose]] = [0.0, -0.7, -0.05, 0.9]
    mask = np.zeros((h, w), np.int32)
    mask[200:900, 450:850] = 1
    args = dict(mask=mask, parts=np.zeros((h, w), np.int32), part_names_in=["Background"], intrinsics=k,
                keypoints=kp, keypoints_3d=k3, grid_side=64)
    idx = [JOINT_NAMES.index(n) for n in lifting.LIFT_JOINTS]
    monkeypatch.setattr(observations, "LIFT_SHARE", 0.0)
    raw = observations.observe(1, **args).world
    monkeypatch.setattr(observations, "LIFT_SHARE", 0.5)
    mixed = observations.observe(1, **args).world
    expect = lifting.blend(raw[idx], lifting.lift(xy, k), 0.5)
    assert np.allclose(mixed[idx], expect)
    assert np.abs(mixed[idx] - raw[idx]).max() > 1e-3  # it did move them
    others = [j for j in range(len(JOINT_NAMES)) if j not in idx]
    assert np.array_equal(np.isnan(mixed[others]), np.isnan(raw[others]))
    assert np.allclose(mixed[nose], raw[nose])
    # a limb keypoint the backend did not place (score 0): nothing to lift from
    kp[0, JOINT_KEYPOINT_INDEX[JOINT_NAMES.index("left_ankle")], 2] = 0.0
    assert np.allclose(observations.observe(1, **args).world, raw, equal_nan=True)
