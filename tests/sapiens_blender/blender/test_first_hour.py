# SPDX-License-Identifier: GPL-3.0-or-later
"""What an artist meets in the first hour with a built file: it renders as it is (world and
light), it holds no unused images, and the build settings reach the build."""

from __future__ import annotations

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import identity  # noqa: E402

from synthetic_scene import ellipsoid_maps  # noqa: E402

pytestmark = [pytest.mark.bpy]


@pytest.fixture()
def empty():
    api.new_scene()


def test_one_build_makes_one_normals_image_and_no_orphans(empty):
    maps = ellipsoid_maps(96, 72, people=2)
    api.build_from_maps(maps, name="a")
    api.build_from_maps(maps, name="b")  # a second API build makes its own set, once
    normals = [im for im in bpy.data.images if im.get(identity.ROLE) == identity.NORMALS]
    assert len(normals) == 4  # two builds x two people
    live_materials = {m for ob in bpy.data.objects if ob.type == "MESH" for m in ob.data.materials}
    used = {n.image for m in live_materials for n in m.node_tree.nodes if n.type == "TEX_IMAGE"}
    assert set(bpy.data.images) <= used, [im.name for im in set(bpy.data.images) - used]


def render_mean(tmp_path, size=(48, 36)) -> tuple[float, float]:
    """Mean brightness of a small Cycles render: (over the image, over its centre)."""
    scene = bpy.context.scene
    scene.render.engine = "CYCLES"
    scene.cycles.samples = 4
    scene.cycles.device = "CPU"
    scene.render.resolution_x, scene.render.resolution_y = size
    scene.render.resolution_percentage = 100
    scene.render.filepath = str(tmp_path / "render.png")
    bpy.ops.render.render(write_still=True)
    image = bpy.data.images.load(str(tmp_path / "render.png"))
    w, h = image.size
    px = np.empty(w * h * image.channels, np.float32)
    image.pixels.foreach_get(px)
    rgb = px.reshape(h, w, image.channels)[..., :3]
    bpy.data.images.remove(image)
    return float(rgb.mean()), float(rgb[h // 4: 3 * h // 4, w // 4: 3 * w // 4].mean())


def test_a_built_file_renders_as_it_is(empty, tmp_path):
    maps = ellipsoid_maps(96, 72)
    maps.image[...] = (200, 150, 120)  # a lit person ...
    maps.image[maps.mask == 0] = (40, 60, 90)  # ... before a dark blue backdrop
    result = api.build_from_maps(maps, name="lit")
    assert result.report.added == ["world", "light"]
    world = bpy.context.scene.world
    assert world is not None and world.color[2] > world.color[0]  # the backdrop's blue
    (sun,) = [o for o in bpy.data.objects if o.type == "LIGHT"]
    towards_light = sun.rotation_euler.to_matrix() @ __import__("mathutils").Vector((0, 0, 1))
    assert towards_light.y < 0  # the key light is on the camera's side (the camera looks along +Y)
    whole, centre = render_mean(tmp_path)
    assert whole > 0.05 and centre > 0.1, (whole, centre)  # not black


def test_the_users_world_and_lights_are_kept(empty):
    world = bpy.data.worlds.new("mine")
    bpy.context.scene.world = world
    lamp = bpy.data.objects.new("my lamp", bpy.data.lights.new("my lamp", "POINT"))
    bpy.context.scene.collection.objects.link(lamp)
    result = api.build_from_maps(ellipsoid_maps(96, 72), name="kept")
    assert result.report.added == []
    assert bpy.context.scene.world == world and [o.name for o in bpy.data.objects if o.type == "LIGHT"] == ["my lamp"]


def half_body_maps():
    """The ellipsoid person cut off at mid-thigh, as a waist-up photo: legs not visible."""
    maps = ellipsoid_maps(96, 120)
    cut = int(maps.height * 0.55)
    maps.mask[cut:] = 0
    maps.parts[cut:] = 0
    maps.depth[cut:] = np.nan
    maps.normal[cut:] = np.nan
    below = maps.keypoints[0, :, 1] >= cut
    maps.keypoints[0, below, 2] = 0.0
    return maps


def test_a_half_body_photo_gets_no_bones_outside_the_body(empty):
    result = api.build_from_maps(half_body_maps(), name="half")
    person = result.people[0]
    bones = {b.name: b for b in person.armature.data.bones}
    assert not {"thigh.L", "shin.L", "foot.L", "thigh.R", "shin.R", "foot.R"} & set(bones)
    assert {"pelvis", "spine", "chest", "neck", "head", "upper_arm.L", "upper_arm.R"} <= set(bones)
    assert "thigh.L" in person.report.joints["dropped_bones"]
    verts = np.array([v.co for v in person.mesh.data.vertices])
    lowest = verts[:, 2].min()
    tails = np.array([b.tail_local for b in bones.values()])
    assert tails[:, 2].min() > lowest - 0.1  # nothing hangs below the mesh
    assert result.people[0].report.skinning.unweighted_vertices == 0


def test_a_full_body_keeps_its_legs(empty):
    bones = {b.name for b in api.build_from_maps(ellipsoid_maps(96, 120), name="full").people[0].armature.data.bones}
    assert {"thigh.L", "shin.L", "foot.L", "toe.R"} <= bones


def test_skin_weights_stay_on_their_part_with_at_most_four_bones(empty, tmp_path):
    from gltf_reader import Glb

    from sapiens_blender.blender import skinning
    from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX

    maps = ellipsoid_maps(96, 120)
    nose, neck = maps.keypoints[0, KEYPOINT_INDEX["nose"]], maps.keypoints[0, KEYPOINT_INDEX["neck"]]
    chin = (nose + neck) / 2
    maps.keypoints[0, KEYPOINT_INDEX["tip_of_chin"]] = (chin[0], chin[1], 0.9)
    result = api.build_from_maps(maps, name="w")
    person = result.people[0]
    mesh = person.mesh
    bones = [b.name for b in person.armature.data.bones]
    weights = skinning.read_weights(mesh, bones)
    count = (weights > 0).sum(axis=1)
    assert count.max() <= 4 and count.min() >= 1 and person.report.skinning.max_influences <= 4
    assert np.allclose(weights.sum(axis=1), 1.0, atol=0.003)

    def part(name):
        return skinning.read_weights(mesh, [f"part:{name}"])[:, 0] > 0

    torso_bones = [bones.index(b) for b in ("pelvis", "spine", "chest", "clavicle.L", "clavicle.R", "neck")]
    others = np.setdiff1d(np.arange(len(bones)), torso_bones)
    assert not weights[part("Torso")][:, others].any()  # no torso vertex follows an arm or a leg
    # Face above the chin follows the head (its pixel row is above the chin's).
    rows = maps.intrinsics[1, 1] * -np.array([v.co for v in mesh.data.vertices])[:, 2] / 4.0 + maps.intrinsics[1, 2]
    face = part("Face_Neck") & (rows < chin[1] - 3)
    assert face.sum() > 20
    assert (weights[face].argmax(axis=1) == bones.index("head")).mean() > 0.95
    # What a game engine gets: at most 4 joints per vertex whose weights sum to one.
    path = api.export(tmp_path / "w.glb", result)
    glb = Glb(path)
    prim = glb.json["meshes"][0]["primitives"][0]
    exported = glb.accessor(prim["attributes"]["WEIGHTS_0"]).astype(np.float64)
    assert np.allclose(exported.sum(axis=1), 1.0, atol=0.01) and "WEIGHTS_1" not in prim["attributes"]
