# SPDX-License-Identifier: GPL-3.0-or-later
"""Degraded input still builds and says what it filled: depth noise, mask holes, missing
keypoints, two people."""

import copy

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from scenes import visible_points
from scipy.spatial import cKDTree

from sapiens_blender.core.geometry import joints as joints_mod
from sapiens_blender.core.geometry import skeleton, surface
from sapiens_blender.core.geometry.closed import close_body
from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX

pytestmark = [pytest.mark.groundtruth, pytest.mark.anny]


def _copy_maps(scene):
    return copy.deepcopy(scene.maps)


def test_depth_noise_still_builds_close_to_truth(gt_scene):
    scene = gt_scene("arms_bent")
    maps = _copy_maps(scene)
    rng = np.random.default_rng(1)
    noise = rng.normal(0.0, 0.005, maps.depth.shape).astype(np.float32)  # 5 mm
    maps.depth = maps.depth + noise
    maps.pointmap = maps.pointmap.copy()
    maps.pointmap[..., 2] += noise
    mesh = surface.build_surface_mesh(maps, 1)
    gt = visible_points(scene)[0]
    d = cKDTree(gt).query(mesh.vertices.astype(np.float64))[0]
    joints = joints_mod.lift_joints(maps, 1)
    err = [np.linalg.norm(joints[n].xyz - scene.body.joints[n]) for n in ("left_elbow", "right_knee", "left_wrist")]
    print(f"5 mm depth noise: mesh->truth mean {d.mean() * 1000:.2f} mm, "
          f"{mesh.report['triangles_dropped_at_depth_jumps']} triangles dropped, joint errors "
          f"{[round(e * 100, 2) for e in err]} cm")
    assert len(mesh.faces) > 0.8 * len(surface.build_surface_mesh(scene.maps, 1).faces)
    assert d.mean() < 0.01 * scene.body.height
    assert max(err) < 0.06


def test_holes_in_the_mask_are_reported_and_skipped(gt_scene):
    scene = gt_scene("arms_raised_heavy")
    maps = _copy_maps(scene)
    rng = np.random.default_rng(2)
    rows, cols = np.nonzero(maps.mask == 1)
    rr, cc = np.mgrid[0:maps.height, 0:maps.width]
    for i in rng.choice(len(rows), 12, replace=False):  # 12 holes of radius 4 px
        maps.mask[(rr - rows[i]) ** 2 + (cc - cols[i]) ** 2 <= 16] = 0
    unknown = rng.random(maps.depth.shape) < 0.01  # and 1 % of depth unknown
    maps.depth[unknown] = np.nan
    maps.pointmap[unknown] = np.nan
    mesh = surface.build_surface_mesh(maps, 1)
    assert mesh.report["masked_pixels_without_depth"] > 0
    assert (maps.mask[mesh.pixel[:, 0], mesh.pixel[:, 1]] == 1).all()
    assert np.isfinite(mesh.vertices).all()
    # The optional closed body stays watertight around the holes (they become tunnels).
    closed = close_body(mesh, maps)
    f = closed.faces.astype(np.int64)
    key = f.ravel() * len(closed.vertices) + f[:, [1, 2, 0]].ravel()
    assert len(np.unique(key)) == len(key)
    assert np.isin(f[:, [1, 2, 0]].ravel() * len(closed.vertices) + f.ravel(), key).all()
    joints = joints_mod.lift_joints(maps, 1)
    sk = skeleton.build_skeleton(joints, 1)
    print(f"holes: {mesh.report}; filled joints: {joints.report['filled']}")
    assert len(sk.names) == len(skeleton.BODY_BONES)


def test_missing_keypoints_are_filled_and_flagged(gt_scene):
    scene = gt_scene("arms_bent")
    maps = _copy_maps(scene)
    gone = ("left_wrist", "right_knee", "right_ankle")  # score 0: not even a 2D position
    low = ("left_elbow",)  # seen but below the score threshold: 2D kept, depth from the skeleton
    for n in gone:
        maps.keypoints[0, KEYPOINT_INDEX[n]] = 0.0
    for n in low:
        maps.keypoints[0, KEYPOINT_INDEX[n], 2] = 0.1
    joints = joints_mod.lift_joints(maps, 1)
    report = joints.report
    errors = {n: np.linalg.norm(joints[n].xyz - scene.body.joints[n]) for n in gone + low}
    print(f"filled: {report['filled']}; errors (cm): { {n: round(e * 100, 1) for n, e in errors.items()} }")
    for n in gone + low:
        assert joints[n].estimated and n in report["filled"], n
    assert not joints["right_elbow"].estimated
    # The low-score elbow keeps its 2D keypoint: it reprojects onto it.
    uv = surface.reproject(joints["left_elbow"].xyz, maps.intrinsics)
    assert np.allclose(uv, maps.keypoints[0, KEYPOINT_INDEX["left_elbow"], :2], atol=1e-3)
    # Mirrored/filled joints land in the body's neighbourhood, not anywhere.
    assert max(errors.values()) < 0.45
    sk = skeleton.build_skeleton(joints, 1)
    estimated = {sk.names[i] for i in np.nonzero(sk.estimated)[0]}
    assert {"forearm.L", "hand.L", "shin.R", "foot.R"} <= estimated
    assert "upper_arm.R" not in estimated


def test_two_people_build_separately(gt_scene):
    scene = gt_scene("two_people")
    maps = scene.maps
    assert maps.person_ids == [1, 2]
    truth = visible_points(scene)
    for pid in (1, 2):
        mesh = surface.build_surface_mesh(maps, pid)
        assert (maps.mask[mesh.pixel[:, 0], mesh.pixel[:, 1]] == pid).all()
        d = cKDTree(truth[pid - 1]).query(mesh.vertices.astype(np.float64))[0]
        joints = joints_mod.lift_joints(maps, pid)
        sk = skeleton.build_skeleton(joints, pid)
        errs = [np.linalg.norm(joints[n].xyz - scene.bodies[pid - 1].joints[n])
                for n in ("left_elbow", "right_elbow", "left_knee", "right_knee") if scene.visible[pid - 1][n]]
        print(f"person {pid}: {len(mesh.vertices)} vertices, mesh->own truth mean {d.mean() * 1000:.2f} mm, "
              f"joint errors {[round(e * 100, 1) for e in errs]} cm, filled {joints.report['filled']}")
        assert d.mean() < 0.01 * scene.bodies[pid - 1].height
        assert errs and max(errs) < 0.05
        assert sk.person_id == pid and len(sk.names) == len(skeleton.BODY_BONES)
