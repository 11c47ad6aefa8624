# SPDX-License-Identifier: GPL-3.0-or-later
"""The fitted body's 52 ARKit shape keys in Blender: set to the fit's expression, deforming before
the armature (the evaluated mesh is anny's skinning of the expressed bind pose), written as named
glTF morph targets (valid glTF, sparse) and FBX blend shapes; ``expressions=False`` leaves them out."""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

bpy = pytest.importorskip("bpy")

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import mesh  # noqa: E402
from sapiens_blender.blender.expressions import expression_values  # noqa: E402
from sapiens_blender.core.body import pose as body_pose  # noqa: E402
from sapiens_blender.core.body.expressions import ARKIT_NAMES  # noqa: E402
from sapiens_blender.core.body.records import BodyFit, attach_body  # noqa: E402
from sapiens_blender.core.geometry.types import camera_to_blender  # noqa: E402
from sapiens_blender.core.maps.canonical import Maps  # noqa: E402

from gltf_reader import Glb, validate_gltf  # noqa: E402

pytestmark = [pytest.mark.bpy, pytest.mark.anny]
SET = {"jawOpen": 0.6, "eyeBlinkLeft": 1.0, "mouthSmileRight": 0.3}


@pytest.fixture(scope="module")
def expressed(body_scene, tmp_path_factory):
    scene = body_scene("standing")
    values = np.zeros((1, 52), np.float32)
    for name, v in SET.items():
        values[0, ARKIT_NAMES.index(name)] = v
    fit = BodyFit.from_arrays(dict(scene.fit.to_arrays(), expressions=values), template=scene.template)
    maps = Maps.load(scene.maps.save(tmp_path_factory.mktemp("expr") / "m.npz"))
    attach_body(maps, scene.template, fit)
    return scene, maps, values[0]


def test_keys_carry_the_fit_expression_and_deform_before_the_armature(expressed):
    scene, maps, values = expressed
    api.new_scene()
    result = api.build_from_maps(maps, name="face", body="minimal")
    obj = result.people[0].body_mesh
    assert [k.name for k in obj.data.shape_keys.key_blocks] == ["Basis", *ARKIT_NAMES]
    got = expression_values(obj)
    assert all(got[n] == pytest.approx(float(values[i]), abs=1e-6) for i, n in enumerate(ARKIT_NAMES))
    assert result.people[0].report.body.expressions == 52
    t, f = scene.template, scene.fit
    rest = f.rest_vertices[0].astype(np.float64)
    expressed_rest = rest.copy()
    expressed_rest[t.expression_vertices] += np.tensordot(values, t.expression_deltas, 1)
    skinned = body_pose.skin_vertices(expressed_rest, f.rest_bone_matrices[0], f.bone_matrices[0],
                                      t.weight_bones, t.weight_values)
    truth = camera_to_blender(skinned @ f.placement[0, :3, :3].T.astype(np.float64) + f.placement[0, :3, 3])
    world = mesh.mesh_vertices(obj, evaluated=True)
    assert np.abs(world - truth).max() < 1e-4
    jaw = t.expression_vertices[np.linalg.norm(t.expression_deltas[ARKIT_NAMES.index("jawOpen")], axis=1) > 0.01]
    neutral = camera_to_blender(f.vertices[0].astype(np.float64))
    assert np.linalg.norm(world[jaw] - neutral[jaw], axis=1).min() > 0.003, "the open jaw shows in the posed body"


def test_glb_has_named_sparse_morph_targets_and_fbx_blend_shapes(expressed, tmp_path):
    scene, maps, values = expressed
    api.new_scene()
    result = api.build_from_maps(maps, name="face", body="minimal")
    path = api.export(tmp_path / "face.glb", result)
    report = validate_gltf(path)
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    glb = Glb(path)
    (body,) = glb.json["meshes"]
    assert body["extras"]["targetNames"] == list(ARKIT_NAMES)
    assert np.allclose(body["weights"], values, atol=1e-6)
    jaw = ARKIT_NAMES.index("jawOpen")
    moved = []
    for prim in body["primitives"]:
        assert len(prim["targets"]) == 52 and set(prim["targets"][jaw]) == {"POSITION"}
        assert "sparse" in glb.json["accessors"][prim["targets"][jaw]["POSITION"]] or \
            glb.json["accessors"][prim["targets"][jaw]["POSITION"]].get("count", 0) == 0
        moved.append(np.linalg.norm(glb.accessor(prim["targets"][jaw]["POSITION"]), axis=1))
    truth = np.linalg.norm(scene.template.expression_deltas[jaw], axis=1)
    assert np.concatenate(moved).max() == pytest.approx(truth.max(), abs=1e-5)  # a rotation keeps lengths
    api.export(tmp_path / "face.fbx", result)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.fbx(filepath=str(tmp_path / "face.fbx"))
    imported = next(o for o in bpy.context.scene.objects if o.type == "MESH")
    names = [k.name for k in imported.data.shape_keys.key_blocks]
    assert set(ARKIT_NAMES) <= set(names)
    assert imported.data.shape_keys.key_blocks["jawOpen"].value == pytest.approx(0.6, abs=1e-3)


def test_no_expressions_gives_the_lean_body(expressed, tmp_path):
    _scene, maps, _values = expressed
    api.new_scene()
    result = api.build_from_maps(maps, name="lean", body="minimal", expressions=False)
    obj = result.people[0].body_mesh
    assert obj.data.shape_keys is None and expression_values(obj) == {}
    glb = Glb(api.export(tmp_path / "lean.glb", result))
    assert all("targets" not in p for m in glb.json["meshes"] for p in m["primitives"])


def test_the_photo_expression_is_fitted_from_its_face_keypoints(body_scene, tmp_path):
    """A fit without expression values: the build fits them to the maps' face keypoints (here
    the ground truth's, exact). This photo's face is ~25 px high: the fit's ridge takes a
    detector's 1.4 px noise into account (5 % of this face), so the values are the fit's own,
    shrunk towards neutral (the jaw still clearly open); the report lists them."""
    import face_cases
    from sapiens_blender.core.body.expression_fit import photo_expression

    scene = body_scene("standing")
    truth = face_cases.values_of(scene.template, {"jawOpen": 0.8, "mouthSmileRight": 0.6})
    maps = Maps.load(scene.maps.save(tmp_path / "face.npz"))
    kp = face_cases.keypoints(scene.template, scene.fit, 0, truth, np.random.default_rng(0), noise=0.0,
                              intrinsics=np.asarray(maps.intrinsics, np.float64))
    rows = kp[:, 2] > 0
    maps.keypoints[0, rows] = kp[rows]
    want, _source = photo_expression(scene.template, scene.fit, 0, maps, 1)
    api.new_scene()
    result = api.build_from_maps(maps, name="photo", body="minimal")
    got = expression_values(result.people[0].body_mesh)
    assert [got[n] for n in scene.template.expression_names] == pytest.approx(want.tolist(), abs=1e-5)
    assert got["jawOpen"] > 0.3 and got["mouthSmileRight"] > 0.05 and got["tongueOut"] == 0.0
    body = result.people[0].report.body
    assert body.expression_source == "fitted to the photo's face keypoints"
    assert body.expression_values["jawOpen"] == pytest.approx(got["jawOpen"], abs=0.006)
    assert all(v > 0.05 for v in body.expression_values.values())


def test_a_clip_keys_the_expressions_and_exports_weights_channels(body_scene, tmp_path):
    """The talking ground truth keyed on a built body: per-frame values on the shape keys, a glTF
    ``weights`` channel with a key per frame (valid glTF), FBX blend-shape curves."""
    from sapiens_blender.blender.expressions import key_expressions
    from sapiens_blender.core.motion.face import track_expressions

    import face_cases

    scene = body_scene("standing")
    track, truth = face_cases.talking_track(scene)
    values = track_expressions(track, face_cases.INTRINSICS)
    api.new_scene()
    result = api.build_from_maps(scene.maps, name="talk", body="minimal")
    obj = result.people[0].body_mesh
    keys = 1.0 + np.arange(len(values))
    key_expressions(obj, scene.template.expression_names, keys, values, "talk face")
    jaw = scene.template.expression_names.index("jawOpen")
    bpy.context.scene.frame_set(4)  # truth: the jaw opened (frame index 3)
    assert obj.data.shape_keys.key_blocks["jawOpen"].value == pytest.approx(float(values[3, jaw]), abs=1e-5)
    assert values[3, jaw] > 0.4
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, len(values)
    path = api.export(tmp_path / "talk.glb", result)
    from sapiens_blender.blender.export import export as export_file

    export_file(tmp_path / "talk_anim.glb", result.objects, animation=True)
    report = validate_gltf(tmp_path / "talk_anim.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    glb = Glb(tmp_path / "talk_anim.glb")
    channels = [c for a in glb.json["animations"] for c in a["channels"] if c["target"]["path"] == "weights"]
    assert len(channels) == 1
    sampler = next(a["samplers"][channels[0]["sampler"]] for a in glb.json["animations"]
                   if channels[0] in a["channels"])
    weights = glb.accessor(sampler["output"]).reshape(len(values), 52)
    np.testing.assert_allclose(weights, values, atol=1e-5)
    assert Glb(path).json.get("animations") is None  # a still export has none
    export_file(tmp_path / "talk.fbx", result.objects, animation=True)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.fbx(filepath=str(tmp_path / "talk.fbx"))
    imported = next(o for o in bpy.context.scene.objects if o.type == "MESH")
    action = imported.data.shape_keys.animation_data.action
    assert action is not None
