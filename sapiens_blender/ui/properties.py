# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-scene settings of the Sapiens panel (`scene.sapiens`), saved with the .blend."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, IntProperty, PointerProperty, StringProperty

from . import storage

ALL_PEOPLE = "ALL"
# Newer Blenders warn about "//" paths unless the property says it supports them; older ones
# reject the option at registration, so it is passed only where RNA knows it.
_PATH_OPTIONS = ({"options": {"PATH_SUPPORTS_BLEND_RELATIVE"}}
                 if "is_path_supports_blend_relative" in bpy.types.Property.bl_rna.properties else {})
_person_items_cache: list = []


def _person_items(self, context):
    people = storage.analysis_summary(context.scene).get("people", []) if context else []
    items = [(ALL_PEOPLE, "Everyone", "Build every person found in the photo")]
    items += [(str(pid), f"Person {pid}", f"Only person {pid}") for pid in people]
    _person_items_cache[:] = items  # Blender needs the strings kept alive
    return items


class SapiensSceneProperties(bpy.types.PropertyGroup):
    photo_source: EnumProperty(
        name="Photo",
        items=[("FILE", "File", "A photo file on disk"),
               ("IMAGE", "Image", "An image already loaded in this .blend")],
        default="FILE",
    )
    photo_path: StringProperty(name="Photo File", subtype="FILE_PATH",
                               description="Photo of one or more people", **_PATH_OPTIONS)
    photo_image: PointerProperty(name="Photo Image", type=bpy.types.Image)
    analysis: PointerProperty(name="Analysis", type=bpy.types.Text,
                              description="The stored maps of the last analysis")
    person: EnumProperty(name="Person", items=_person_items,
                         description="Which person to build when the photo shows several")
    parts_image: PointerProperty(name="Parts", type=bpy.types.Image)
    normal_image: PointerProperty(name="Normals", type=bpy.types.Image)
    depth_image: PointerProperty(name="Depth", type=bpy.types.Image)
    # Build settings (the CLI's --stride, --closed / body, --skinning).
    stride: IntProperty(name="Resolution", default=1, min=1, max=16,
                        description="One vertex per N photo pixels: 1 is the finest and slowest, "
                                    "2 a quarter of the vertices")
    shape: EnumProperty(
        name="Shape",
        items=[("RELIEF", "Relief", "The surface seen in the photo (fast, exact where visible)"),
               ("CLOSED", "Closed", "A watertight body: the visible front plus an inferred back"),
               ("BODY", "Body", "A fitted full body, also where the photo shows none (needs the "
                                "server environment with the body fit)")],
        default="RELIEF",
    )
    body: EnumProperty(
        name="Body",
        items=[("minimal", "Minimal", "The fitted body without clothes"),
               ("clothed", "Clothed", "The fitted body shaped to the clothes in the photo")],
        default="clothed",
    )
    expressions: BoolProperty(
        name="Face Expressions", default=True,
        description="The 52 ARKit face shape keys on the fitted body, set to the photo's expression "
                    "(off: the lean file, about 1 MB less per body in a .glb)")
    skinning: EnumProperty(
        name="Skinning",
        items=[("auto", "Bone Heat", "Smooth weights by bone heat, parts where it fails"),
               ("parts", "Parts", "Each vertex follows the bone of its body part (fast)"),
               ("none", "None", "An armature without weights")],
        default="auto",
    )


def selected_people(scene) -> list[int] | None:
    """None = everyone; else the chosen person id."""
    try:
        choice = scene.sapiens.person
    except (TypeError, ValueError):
        return None
    return None if choice in ("", ALL_PEOPLE) else [int(choice)]


def build_settings(scene) -> dict:
    """The panel's build settings as BuildOptions fields."""
    props = scene.sapiens
    shape = props.shape
    return {"stride": int(props.stride), "closed": shape == "CLOSED",
            "body": props.body if shape == "BODY" else "none", "skinning": props.skinning,
            "expressions": bool(props.expressions)}


def register_scene_properties():
    bpy.types.Scene.sapiens = PointerProperty(type=SapiensSceneProperties)


def unregister_scene_properties():
    del bpy.types.Scene.sapiens


CLASSES = (SapiensSceneProperties,)
