# SPDX-License-Identifier: GPL-3.0-or-later
"""The geometry core against exact ground truth (anny bodies ray-cast into canonical maps).

Run with ``pytest -s tests/sapiens_blender/core/geometry/test_geometry_gt.py`` to see the measured errors.
"""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from anny_fixtures import SCENE_SPECS
from scene_variants import with_clothing
from scenes import hit_normals, visible_points
from scipy.spatial import cKDTree

from sapiens_blender.core.geometry import joints as joints_mod
from sapiens_blender.core.geometry import normals, skeleton, surface
from sapiens_blender.core.geometry.closed import close_body
from sapiens_blender.core.geometry.types import CAMERA_TO_BLENDER
from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX

pytestmark = [pytest.mark.groundtruth, pytest.mark.anny]

LIMB_JOINTS = ("left_elbow", "right_elbow", "left_wrist", "right_wrist",
               "left_knee", "right_knee", "left_ankle", "right_ankle")
ROOT_JOINTS = ("left_shoulder", "right_shoulder", "left_hip", "right_hip")
FACE_POINTS = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "neck")
SCENES = tuple(SCENE_SPECS)


def _mesh_samples(mesh):
    """Vertices plus face centroids: the built surface, faces included (bad faces would show)."""
    v = mesh.vertices.astype(np.float64)
    return np.concatenate([v, v[mesh.faces].mean(axis=1)])


def _chamfer(pred, gt):
    d_pred = cKDTree(gt).query(pred)[0]
    d_gt = cKDTree(pred).query(gt)[0]
    return 0.5 * (d_pred.mean() + d_gt.mean()), d_pred, d_gt


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("name", SCENES)
def test_visible_surface_chamfer_within_1_percent_of_height(gt_scene, name, stride):
    scene = gt_scene(name)
    mesh = surface.build_surface_mesh(scene.maps, 1, stride=stride)
    gt = visible_points(scene, supersample=2)[0]
    chamfer, d_pred, d_gt = _chamfer(_mesh_samples(mesh), gt)
    height = scene.body.height
    msg = (f"{name}, stride {stride}: chamfer {chamfer * 1000:.2f} mm = {100 * chamfer / height:.3f} % of height "
           f"{height:.2f} m (pred->gt p95 {np.percentile(d_pred, 95) * 1000:.1f} mm, "
           f"gt->pred p95 {np.percentile(d_gt, 95) * 1000:.1f} mm; {len(mesh.vertices)} vertices)")
    print(msg)
    assert chamfer <= 0.01 * height, msg


@pytest.mark.parametrize("stride", [1, 2])
def test_vertices_reproject_onto_their_pixels(gt_scene, stride):
    scene = gt_scene("arms_bent")
    mesh = surface.build_surface_mesh(scene.maps, 1, stride=stride)
    uv = surface.reproject(mesh.vertices, scene.maps.intrinsics)
    err = np.hypot(uv[:, 0] - (mesh.pixel[:, 1] + 0.5), uv[:, 1] - (mesh.pixel[:, 0] + 0.5))
    # UVs are the same pixel in [0,1] photo coordinates, v up.
    uv_px = np.stack([mesh.uv[:, 0] * scene.maps.width, (1 - mesh.uv[:, 1]) * scene.maps.height], 1)
    uv_err = np.hypot(*(uv_px - (mesh.pixel[:, ::-1] + 0.5)).T)
    print(f"stride {stride}: max reprojection error {err.max():.2e} px, UV {uv_err.max():.2e} px")
    assert err.max() < 1.0 and uv_err.max() < 1e-3
    # Every vertex comes from one of the person's pixels.
    assert (scene.maps.mask[mesh.pixel[:, 0], mesh.pixel[:, 1]] == 1).all()


def _joint_errors(scene, joints, names, person=0):
    body = scene.bodies[person]
    return {n: float(np.linalg.norm(joints[n].xyz - body.joints[n]))
            for n in names if scene.visible[person][n] and n in joints}


@pytest.mark.parametrize("clothed", [False, True], ids=["body_parts", "clothing_labels"])
@pytest.mark.parametrize("name", SCENES)
def test_joint_centres_from_exact_keypoints(gt_scene, name, clothed):
    scene = gt_scene(name)
    # Clothed: torso+arms labelled Upper_Clothing, legs Lower_Clothing, as Sapiens does.
    joints = joints_mod.lift_joints(with_clothing(scene.maps) if clothed else scene.maps, 1)
    limbs = _joint_errors(scene, joints, LIMB_JOINTS)
    roots = _joint_errors(scene, joints, ROOT_JOINTS)
    face = _joint_errors(scene, joints, FACE_POINTS)
    table = ", ".join(f"{n} {e * 100:.1f}" for n, e in {**limbs, **roots, **face}.items())
    msg = (f"{name}{' (clothing labels)' if clothed else ''}: limbs mean {np.mean(list(limbs.values())) * 100:.2f} cm max "
           f"{max(limbs.values()) * 100:.2f} cm ({len(limbs)} visible); shoulders+hips mean "
           f"{np.mean(list(roots.values())) * 100:.2f} cm [cm: {table}]")
    print(msg)
    assert len(limbs) >= 6 and len(roots) == 4, msg
    assert np.mean(list(limbs.values())) <= 0.03, msg
    assert max(limbs.values()) <= 0.05, msg
    assert np.mean(list(roots.values())) <= 0.05, msg
    assert face and max(face.values()) <= 0.03, msg  # skin points and the neck inside the body
    # Joints lie inside the body: behind the visible surface at their own pixel.
    for n in limbs:
        u, v = scene.maps.keypoints[0, KEYPOINT_INDEX[n], :2].astype(int)
        assert joints[n].xyz[2] > scene.maps.depth[v, u], n


@pytest.mark.parametrize("name", SCENES)
def test_normal_textures_match_ground_truth(gt_scene, name):
    scene = gt_scene(name)
    maps = scene.maps
    mesh = surface.build_surface_mesh(maps, 1)
    obj = normals.object_space_normal_map(maps, 1)
    truth = hit_normals(scene) @ CAMERA_TO_BLENDER.T  # independent: from the GT triangles
    on = (maps.mask == 1) & np.isfinite(obj).all(-1) & np.isfinite(truth).all(-1)

    def angle(a, b):
        return np.degrees(np.arccos(np.clip(np.einsum("ij,ij->i", a, b), -1, 1)))

    tex_err = angle(obj[on].astype(np.float64), truth[on])
    # The built geometry agrees with the texture (vertex normals vs the GT normal at the pixel).
    n, t, sign = normals.tangent_frames(mesh)
    r, c = mesh.pixel[:, 0], mesh.pixel[:, 1]
    geo_err = angle(n, truth[r, c])
    # Tangent space round trip: decode with the same per-vertex frames.
    tangent = normals.tangent_space_normal_map(mesh, maps)
    decoded = normals.decode_tangent_normals(tangent[r, c], n, t, sign)
    rt_err = angle(decoded, obj[r, c].astype(np.float64))
    msg = (f"{name}: object-space texture error mean {tex_err.mean():.3f} deg (max {tex_err.max():.3f}); "
           f"mesh vertex normals vs GT median {np.median(geo_err):.2f} deg, mean {geo_err.mean():.2f}; "
           f"tangent round trip max {rt_err.max():.4f} deg")
    print(msg)
    assert tex_err.mean() <= 3.0, msg
    assert rt_err.max() <= 0.05, msg
    assert np.median(geo_err) <= 10.0, msg
    # Surfaces facing the lens encode as Blender -Y (towards the camera at the origin).
    assert np.median(obj[on][:, 1]) < -0.5


def test_skeleton_hierarchy_and_roll_on_ground_truth(gt_scene):
    scene = gt_scene("arms_bent")
    sk = skeleton.build_skeleton(joints_mod.lift_joints(scene.maps, 1), 1)
    assert sk.names == [b for b, _ in skeleton.BONE_HIERARCHY[: len(skeleton.BODY_BONES)]]
    parents = dict(skeleton.BONE_HIERARCHY)
    for i, name in enumerate(sk.names):
        want = parents[name]
        assert (sk.parents[i] == -1) if want is None else (sk.names[sk.parents[i]] == want)
    # Rolls encode Z axes that face the person's front (towards the camera for this scene).
    mats = skeleton.bone_matrices(sk.heads @ CAMERA_TO_BLENDER.T, sk.tails @ CAMERA_TO_BLENDER.T, sk.rolls)
    assert np.allclose(mats[:, :, 2], sk.z_axes, atol=1e-6)
    limb = [i for i, n in enumerate(sk.names) if n.split(".")[0] in ("upper_arm", "forearm", "thigh", "shin", "spine")]
    assert (sk.z_axes[limb] @ np.array([0.0, -1.0, 0.0]) > 0.3).all()


def test_closed_body_is_watertight_and_encloses_the_body(gt_scene):
    scene = gt_scene("arms_bent")
    closed = close_body(surface.build_surface_mesh(scene.maps, 1), scene.maps)
    f = closed.faces.astype(np.int64)
    n = len(closed.vertices)
    a, b = f.ravel(), f[:, [1, 2, 0]].ravel()
    key = a * n + b
    assert len(np.unique(key)) == len(key)  # no directed edge twice: consistent orientation
    assert np.isin(b * n + a, key).all()  # every edge has its opposite: watertight
    v = closed.vertices.astype(np.float64)
    volume = np.einsum("ij,ij->i", v[f[:, 0]], np.cross(v[f[:, 1]], v[f[:, 2]])).sum() / 6.0
    # Normals face outwards (positive volume); a 1.6 m adult is about 0.05-0.08 m^3.
    print(f"closed body: {n} vertices, volume {volume * 1000:.1f} litres")
    assert 0.02 < volume < 0.15
