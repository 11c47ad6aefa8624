# SPDX-License-Identifier: GPL-3.0-or-later
"""One analysis being built into the current scene: its root collection, photo image, camera and
fitted bodies, found again by their tags (``identity``) when ``reuse`` is on, else made anew.
The per-person products are ``incremental.PersonBuild``'s."""

from __future__ import annotations

import bpy

from ..core.geometry.types import GeometryError
from ..core.maps.canonical import Maps
from . import camera, context, identity
from .images import image_from_array


class Scope:
    """One analysis (maps + key) being built into the current scene."""

    def __init__(self, maps: Maps, options, timer, reuse: bool, key: str | None = None):
        self.maps, self.options, self.timer, self.reuse = maps, options, timer, reuse
        self.key = key or identity.analysis_key(maps)
        self.scene = bpy.context.scene
        self.base = f"Sapiens {options.name}"
        self._root = self._photo = self._camera = self._body = None
        self._made: list = []  # images and materials made by this build (found again without reuse)

    def find_object(self, role, person=None, anchor=None):
        return identity.find_object(self.scene, self.key, role, person, anchor) if self.reuse else None

    def find_collection(self, role, person=None):
        return identity.find_collection(self.scene, self.key, role, person) if self.reuse else None

    def find_data(self, data, role, person=None, **extra):
        """Tagged data of this analysis; without reuse only what this build made itself (an
        API build must not pick up an earlier one's, nor make a second normals image)."""
        pool = data if self.reuse else self._made  # roles tell images and materials apart
        return identity.find_data(pool, self.key, role, person, **extra)

    def made(self, data):
        self._made.append(data)
        return data

    def forget(self, pointers: set[int]) -> None:
        """Drop what this build made and is about to remove (a person skipped halfway)."""
        self._made = [d for d in self._made if d.as_pointer() not in pointers]

    def root(self) -> bpy.types.Collection:
        if self._root is None:
            self._root = self.find_collection(identity.ROOT)
            if self._root is None:
                self._root = identity.tag(context.new_collection(self.base), self.key, identity.ROOT)
        return self._root

    def photo(self) -> bpy.types.Image:
        if self._photo is None:
            self._photo = self.find_data(bpy.data.images, identity.PHOTO)
            if self._photo is None:
                image = image_from_array(f"{self.base} photo", self.maps.image)
                self._photo = self.made(identity.tag(image, self.key, identity.PHOTO))
        return self._photo

    def body(self):
        """(BodyTemplate, BodyFit) the maps carry; a clear error when they hold no fit."""
        if self._body is None:
            from ..core.body.records import BodyError, body_from_maps

            try:
                found = body_from_maps(self.maps)
            except BodyError as exc:
                raise GeometryError(f"the body fit in these maps is unusable: {exc}") from exc
            if found is None:
                raise GeometryError("these maps hold no body fit: analyse with the fit (analyze --fit, or "
                                    "build --body, which asks the server for one)")
            self._body = found
        return self._body

    def camera(self) -> tuple[bpy.types.Object, bool]:
        """(camera, built now). A kept camera and the render settings are left as they are."""
        if self._camera is not None:
            return self._camera, False
        root = self.root()
        self._camera = self.find_object(identity.CAMERA, anchor=root)
        if self._camera is not None:
            return self._camera, False
        with self.timer("camera"):
            maps = self.maps
            cam = camera.build_camera(maps.intrinsics, maps.width, maps.height, f"{self.base} camera", root,
                                      background=self.photo(), make_active=self.options.make_active_camera)
        identity.tag(cam, self.key, identity.CAMERA)
        identity.point_at(root, identity.CAMERA, cam)
        self._camera = cam
        return cam, True
