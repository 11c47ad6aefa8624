# SPDX-License-Identifier: GPL-3.0-or-later
"""Python API for headless ``bpy`` scripts (and the CLI): maps or photos in, Blender data out.

    import bpy
    from sapiens_blender import api
    api.new_scene()                                    # optional: an empty scene
    result = api.build_from_maps("photo.npz", stride=2)
    print(result.summary())
    api.export("photo.glb", result)                    # or .blend / .fbx

``build_from_photo`` analyses the photo first, through a running server (``server=URL``) or a
local one started for the call. Everything lands in the current scene; nothing the user already
had is changed (see ``blender/__init__.py``). Requires ``bpy``; the rest of the package does not.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from .blender import export as _export
from .blender.pipeline import PRODUCTS, BuildOptions, BuildResult, PersonResult, build_products
from .blender.pipeline import build_from_maps as _build
from .core.maps import Maps

__all__ = ["BuildOptions", "BuildResult", "PersonResult", "PRODUCTS", "build_from_maps", "build_from_photo",
           "build_products", "export", "fit_body", "new_scene", "save_joints", "DEFAULT_MODEL"]

# "auto": Sapiens2 where its weights and an accelerator are available, else the offline CPU
# backend; the server says which it chose and why (in the maps' `source`).
DEFAULT_MODEL = "auto"


def new_scene() -> None:
    """Replace the current file with an empty scene (no default cube, camera or light)."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)


def _options(options: BuildOptions | None, name: str | None, overrides: dict) -> BuildOptions:
    """A copy of ``options`` (the caller's object is never changed) with the overrides applied."""
    unknown = sorted(set(overrides) - set(BuildOptions.__dataclass_fields__))
    if unknown:
        raise TypeError(f"unknown build option(s): {', '.join(unknown)}")
    options = replace(options or BuildOptions(), **overrides)
    if name and options.name == BuildOptions.name and "name" not in overrides:
        options.name = name
    return options


def build_from_maps(maps: Maps | str | os.PathLike, options: BuildOptions | None = None, *,
                    server: str | None = None, token: str | None = None, progress=None,
                    **overrides) -> BuildResult:
    """Build from :class:`Maps` or a maps ``.npz`` path. Keyword overrides set BuildOptions fields.

    With ``body`` ('minimal' or 'clothed') and maps that hold no body fit, the fit is asked of
    ``server`` (or of a local server started for the call), see :func:`fit_body`.
    """
    name = None
    if not isinstance(maps, Maps):
        name = Path(maps).stem
        maps = Maps.load(maps)
    options = _options(options, name, overrides)
    if options.body != "none":
        maps = fit_body(maps, server=server, token=token, progress=progress)
    return _build(maps, options)


def build_from_photo(
    photo: str | os.PathLike,
    model: str = DEFAULT_MODEL,
    server: str | None = None,
    token: str | None = None,
    options: BuildOptions | None = None,
    save_maps: str | os.PathLike | None = None,
    progress=None,
    **overrides,
) -> BuildResult:
    """Analyse ``photo`` with ``model`` and build it. ``server`` = URL of a running server
    (with ``token``); without it a local server is started for this call and stopped after."""
    options = _options(options, Path(photo).stem, overrides)
    maps = analyze(photo, model=model, server=server, token=token, progress=progress, fit=options.body != "none")
    if save_maps:
        maps.save(save_maps)
    return _build(maps, options)


def analyze(photo, model: str = DEFAULT_MODEL, server: str | None = None, token: str | None = None,
            progress=None, fit: bool = False) -> Maps:
    """Photo -> Maps through the inference server (remote when ``server`` is given); with
    ``fit`` the maps also carry the fitted bodies (same server)."""
    from .core.analysis import analyze_photo

    def run(client):
        maps = analyze_photo(client, photo, model, progress=progress)
        return _fit_with(client, maps, progress) if fit else maps

    return _with_server(run, server, token)


def fit_body(maps: Maps, server: str | None = None, token: str | None = None, progress=None) -> Maps:
    """``maps`` with the fitted bodies: as they are when they already hold a fit, else fitted by
    ``server`` (or a local server started for the call and stopped after)."""
    from .core.body import has_body

    if has_body(maps):
        return maps
    return _with_server(lambda client: _fit_with(client, maps, progress), server, token)


def _with_server(work, server: str | None, token: str | None):
    if server:
        from .core.client import V2Client

        with V2Client(server, token) as client:
            return work(client)
    from .core.server_process import ServerProcess

    with ServerProcess() as local:
        return work(local.ensure_running())


def _fit_with(client, maps: Maps, progress) -> Maps:
    """The one call site of the server's body fit: maps in, maps carrying template + fit out
    (people the server could not fit are listed in ``maps.extras['fit_notes']``)."""
    from .core.body import fit_maps

    maps, notes = fit_maps(client, maps, progress=progress)
    if notes:
        maps.extras["fit_notes"] = np.asarray(notes, np.str_)
    return maps


def save_joints(path: str | os.PathLike, result: BuildResult) -> Path:
    """Write the joints each person's armature was built from (docs/maps_format.md's joints file:
    camera frame, metres; the fitted body's joints where a body was built)."""
    from .core.geometry.joints_io import write

    people = {p.person_id: p.joints for p in result.people if p.joints}
    if not people:
        raise ValueError("this build made no armature, so there are no joints to save")
    return write(path, people)


def export(path: str | os.PathLike, result: BuildResult | None = None) -> Path:
    """Write ``path`` (.blend, .glb, .gltf, .fbx) atomically. With ``result``, glTF/FBX contain
    only that build's camera, meshes and armatures (exactly one camera); .blend is the whole file."""
    return _export.export(path, result.objects if result is not None else None)
