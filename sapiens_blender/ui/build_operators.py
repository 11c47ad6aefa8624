# SPDX-License-Identifier: GPL-3.0-or-later
"""Build Mesh / Normal Texture / Part Materials / Armature / Build All from the stored analysis.

They read the maps saved in the .blend (no server needed, so they work after reopening the
file) and call the Blender builders on the main thread. One click is one undo step.

- Mesh: the photo-matching camera and one displaced mesh per person (photo material).
- Normal Texture: the person's normal map as a packed image, to use on any mesh.
- Part Materials: the mesh with one material and one vertex group per body part.
- Armature: the mesh with a skinned armature from the 308 keypoints.
- Build All: all of the above.
"""

from __future__ import annotations

import os

import bpy

from .. import api
from ..blender.images import image_from_array
from ..core.geometry import normals as geo_normals
from ..core.geometry.types import GeometryError
from ..core.maps import MapsError
from . import properties, state, storage


def _photo_stem(scene) -> str:
    photo = storage.analysis_summary(scene).get("photo") or "photo"
    return os.path.splitext(os.path.basename(photo))[0] or "photo"


class _BuildOperator:
    bl_options = {"REGISTER", "UNDO"}
    build_options: dict = {}

    @classmethod
    def poll(cls, context):
        scene = getattr(context, "scene", None)
        return scene is not None and not state.SESSION.job_running() and storage.has_analysis(scene)

    def execute(self, context):
        scene = context.scene
        try:
            maps = storage.load_analysis(scene)
            message = self.build(scene, maps, properties.selected_people(scene))
        except (MapsError, GeometryError, ValueError) as exc:
            self.report({"ERROR"}, state.SESSION.set_error(exc))
            return {"CANCELLED"}
        state.SESSION.last_info = message
        self.report({"INFO"}, message)
        return {"FINISHED"}

    def build(self, scene, maps, people) -> str:
        result = api.build_from_maps(maps, name=_photo_stem(scene), people=people, **self.build_options)
        return f"{self.bl_label}: " + result.summary().splitlines()[0]


class SAPIENS_OT_build_mesh(_BuildOperator, bpy.types.Operator):
    """Build the photo-matching camera and a displaced mesh for each person"""

    bl_idname = "sapiens.build_mesh"
    bl_label = "Build Mesh"
    build_options = {"part_materials": False, "armature": False}


class SAPIENS_OT_build_part_materials(_BuildOperator, bpy.types.Operator):
    """Build the mesh with one material and one vertex group per body part"""

    bl_idname = "sapiens.build_part_materials"
    bl_label = "Build Part Materials"
    build_options = {"part_materials": True, "armature": False}


class SAPIENS_OT_build_armature(_BuildOperator, bpy.types.Operator):
    """Build the mesh with an armature from the keypoints, skinned to it"""

    bl_idname = "sapiens.build_armature"
    bl_label = "Build Armature"
    build_options = {"part_materials": False, "armature": True}


class SAPIENS_OT_build_all(_BuildOperator, bpy.types.Operator):
    """Build camera, meshes, normal textures, part materials and skinned armatures"""

    bl_idname = "sapiens.build_all"
    bl_label = "Build All"
    build_options = {"part_materials": True, "armature": True}


class SAPIENS_OT_build_normal_texture(_BuildOperator, bpy.types.Operator):
    """Make each person's normal map a packed image (object space, Blender axes) for any mesh"""

    bl_idname = "sapiens.build_normal_texture"
    bl_label = "Build Normal Texture"

    def build(self, scene, maps, people) -> str:
        people = maps.person_ids if people is None else people
        if not people:
            raise GeometryError("The analysis found no person: there is no normal map to build.")
        names = []
        for pid in people:
            texture = geo_normals.encode_normal_texture(geo_normals.object_space_normal_map(maps, pid))
            image = image_from_array(f"Sapiens {_photo_stem(scene)} person {pid} normals", texture,
                                     non_color=True, float_buffer=True)
            names.append(image.name)
        return f"Normal textures: {', '.join(names)}"


CLASSES = (SAPIENS_OT_build_mesh, SAPIENS_OT_build_normal_texture, SAPIENS_OT_build_part_materials,
           SAPIENS_OT_build_armature, SAPIENS_OT_build_all)
