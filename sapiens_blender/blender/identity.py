# SPDX-License-Identifier: GPL-3.0-or-later
"""Which Blender data belongs to which analysis and person: custom-property tags, not names.

Every data-block a build makes carries ``sapiens_analysis`` (a fingerprint of the maps),
``sapiens_role`` (camera, mesh, armature, ...) and, per person, ``sapiens_person``. Users rename
and move things; tags survive that (and save/reload, undo, glTF extras). A person collection
also points at its mesh and armature (ID pointer properties) so that, when a user duplicates a
tagged object (the copy carries the same tags), the original is still the one found.
"""

from __future__ import annotations

import hashlib

import bpy
import numpy as np

from ..core.maps.canonical import Maps

KEY = "sapiens_analysis"
ROLE = "sapiens_role"
PERSON = "sapiens_person"

ROOT, PERSON_COLLECTION = "root", "person"
CAMERA, MESH, ARMATURE = "camera", "mesh", "armature"
PHOTO, NORMALS = "photo", "normals"
PHOTO_MATERIAL, PART_MATERIAL = "photo material", "part material"
BODY_MESH, BODY_ARMATURE, BODY_DATA = "body mesh", "body armature", "body data"  # the fitted body


def analysis_key(maps: Maps) -> str:
    """A short content fingerprint of the maps: the same analysis gives the same key, also after
    the maps went through the .blend or an .npz (lossless); a new analysis gives a new one."""
    digest = hashlib.blake2b(digest_size=12)
    for name, array in sorted(maps.to_arrays().items()):
        if name.startswith(("body_", "fit_")):
            continue  # a body fit added to the analysis later keeps its key (and its objects)
        array = np.ascontiguousarray(array)
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def tag(data: bpy.types.ID, key: str, role: str, person: int | None = None) -> bpy.types.ID:
    data[KEY] = key
    data[ROLE] = role
    if person is not None:
        data[PERSON] = int(person)
    return data


def is_tagged(data, key: str, role: str | None = None, person: int | None = None) -> bool:
    if data is None or data.get(KEY) != key:
        return False
    if role is not None and data.get(ROLE) != role:
        return False
    return person is None or data.get(PERSON) == person


def find_object(scene: bpy.types.Scene, key: str, role: str, person: int | None = None,
                anchor: bpy.types.ID | None = None) -> bpy.types.Object | None:
    """The scene's object with these tags (objects deleted from the scene are ignored).

    With several candidates (a user's duplicate), the one ``anchor`` points at wins, else the
    first by name.
    """
    candidates = [ob for ob in scene.objects if is_tagged(ob, key, role, person)]
    if not candidates:
        return None
    pointed = anchor.get(pointer_name(role)) if anchor is not None else None
    for ob in candidates:
        if pointed is not None and ob == pointed:
            return ob
    return min(candidates, key=lambda ob: ob.name)


def find_collection(scene: bpy.types.Scene, key: str, role: str,
                    person: int | None = None) -> bpy.types.Collection | None:
    """A collection linked in the scene (at any depth) with these tags."""
    found = [c for c in scene.collection.children_recursive if is_tagged(c, key, role, person)]
    return min(found, key=lambda c: c.name) if found else None


def find_data(collection, key: str, role: str, person: int | None = None, **extra):
    """A data-block of ``bpy.data.<collection>`` (images, materials) with these tags and the
    ``extra`` property values; ``None`` when there is none."""
    for data in collection:
        if is_tagged(data, key, role, person) and all(data.get(k) == v for k, v in extra.items()):
            return data
    return None


def pointer_name(role: str) -> str:
    return f"sapiens_{role.replace(' ', '_')}"


def point_at(anchor: bpy.types.ID, role: str, target: bpy.types.ID) -> None:
    anchor[pointer_name(role)] = target
