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

import contextlib
import os
from dataclasses import replace
from pathlib import Path

from .blender import export as _export
from .core.build.options import PRODUCTS, BuildOptions, wants_fit
from .blender.pipeline import BuildResult, PersonResult, build_products
from .blender.pipeline import build_from_maps as _build
from .core.maps.canonical import Maps

__all__ = ["BuildOptions", "BuildResult", "PersonResult", "PRODUCTS", "build_from_maps", "build_from_photo",
           "build_products", "export", "export_all", "fit_body", "new_scene", "animate", "save_joints", "scan",
           "DEFAULT_MODEL"]

# "auto": Sapiens2 where its weights and an accelerator are available, else the offline CPU
# backend; the server says which it chose and why (in the maps' `source`).
DEFAULT_MODEL = "auto"


def new_scene() -> None:
    """Replace the current file with an empty scene (no default cube, camera or light).

    Reads the home file, not the factory settings: those would also reset the preferences,
    disabling this add-on, and Blender then removes the wheels its server runs on."""
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)


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
    if wants_fit(options.body):
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
    maps = analyze(photo, model=model, server=server, token=token, progress=progress, body=options.body)
    if save_maps:
        maps.save(save_maps)
    return _build(maps, options)


def analyze(photo, model: str = DEFAULT_MODEL, server: str | None = None, token: str | None = None,
            progress=None, body: str = "none") -> Maps:
    """Photo -> Maps through the inference server (remote when ``server`` is given); with a
    ``body`` mode ('minimal' or 'clothed', BodyMode) the maps also carry the fitted bodies, fitted
    by the same server in the same request (people it could not fit: ``maps.extras['fit_notes']``)."""
    from .core.remote import body_calls

    return _with_server(lambda client: body_calls.analyze(client, photo, model, body, progress=progress)[0],
                        server, token)


def fit_body(maps: Maps, server: str | None = None, token: str | None = None, progress=None) -> Maps:
    """``maps`` with the fitted bodies: as they are when they already hold a fit, else fitted by
    ``server`` (or a local server started for the call and stopped after)."""
    from .core.body.records import needs_fit

    if not needs_fit(maps):
        return maps
    return _with_server(lambda client: _fit_with(client, maps, progress), server, token)


def _with_server(work, server: str | None, token: str | None):
    if server:
        from .core.remote.client import V2Client

        with V2Client(server, token) as client:
            return work(client)
    from .core.local_server.runtime import local_server

    # No server environment here: Blender's own Python with the add-on's bundled packages.
    with local_server() as local:
        return work(local.ensure_running())


def _fit_with(client, maps: Maps, progress) -> Maps:
    """Maps from elsewhere (a file) fitted by the server: maps in, maps carrying template + fit out
    (people the server could not fit are listed in ``maps.extras['fit_notes']``)."""
    from .core.remote.body_calls import fit_maps

    return fit_maps(client, maps, progress=progress)[0]


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


def export_all(paths, result: BuildResult | None = None) -> list[Path]:
    """:func:`export` to several paths, all or none (nothing is replaced unless every one succeeds)."""
    return _export.export_all(paths, result.objects if result is not None else None)


def animate(
    clip: str | os.PathLike,
    outputs: list | tuple | str | os.PathLike | None = None,
    *,
    model: str = DEFAULT_MODEL,
    maps_dir: bool = False,
    fps: float | None = None,
    start: int = 0,
    end: int | None = None,
    stride: int = 1,
    offline: bool = False,
    save_joints: str | os.PathLike | None = None,
    server: str | None = None,
    token: str | None = None,
    parallel: int = 4,
    max_side: int | None = None,
    background: bool = True,
    mesh: bool = True,
    name: str | None = None,
    progress=None,
    cancel_event=None,
    rig: str = "body",
    body_mode: str = "clothed",
    rig_names: str = "anny",
    expressions: bool = True,
):
    """A clip (video file or folder of frames; with ``maps_dir`` a folder of maps .npz, no server)
    -> per-track relief armatures with baked actions, the clip's camera, scene fps and range;
    written to each of ``outputs`` (.glb/.gltf/.fbx/.blend) with the animation.

    ``start``/``end`` (exclusive)/``stride`` select input frames (counted from 0); ``fps``
    overrides the input's rate (a folder has none: 25). ``offline`` smooths with the whole clip
    instead of 2 frames of look-ahead.

    ``rig`` 'body' (default): each person is the fitted body (fitted once on their best-seen
    frame, then posed on every frame by the server, core/motion/body_drive.py; ``body_mode``
    'clothed' or 'minimal', bone names ``rig_names``, the 52 ARKit face keys unless not
    ``expressions``); a person the server cannot fit (or a
    server without the fit) keeps the relief armature, and a note says so. ``rig`` 'relief':
    the relief armature, which with ``maps_dir`` needs no server; ``mesh`` then gives it the
    relief mesh of the person's best-measured frame (skinned).
    ``progress(done, total or None, message)`` is called per frame; setting ``cancel_event``
    stops it (RequestCancelled). Returns the ``blender.animation.AnimationResult`` with
    ``.animation`` (the core data, ``.source`` says what moves) and ``.written``.
    """
    from .blender.animation import build_animation
    from .core.motion import joints_file
    from .core.motion.clip import AnimateOptions
    from .core.motion.smoothing import SmoothingOptions
    from .core.motion.sources import FrameRange, open_source
    from .core.files.atomic import atomic_output
    from .core.motion.stream import run_clip, server_analyzer

    if isinstance(outputs, (str, os.PathLike)):
        outputs = [outputs]
    for out in outputs or ():
        _export.export_format(out)  # a bad suffix fails before minutes of analysis
    if rig not in ("body", "relief"):
        raise ValueError(f"rig must be 'body' or 'relief', got {rig!r}")
    source = open_source(clip, FrameRange(start, end, stride), fps, maps=maps_dir, max_side=max_side)
    options = AnimateOptions(smoothing=SmoothingOptions(lag=None if offline else 2))

    blend_only = bool(outputs) and all(Path(o).suffix.lower() == ".blend" for o in outputs)

    def run(client):
        animation = run_clip(source, server_analyzer(client, model, max_side, cancel_event), parallel=parallel,
                             options=options, progress=progress, cancel_event=cancel_event)
        from .core.motion.body_drive import drive_bodies, server_body_driver, stop_bodies

        try:
            if rig == "body":
                # Deferred: Blender builds each body from its fit while the server poses it.
                drive_bodies(animation, *server_body_driver(client, cancel_event=cancel_event), progress=progress,
                             whole_clip=offline, defer=True)
            result = build_animation(animation, name or Path(clip).stem,
                                     background=None if maps_dir or not background else clip, mesh=mesh,
                                     normal_space="OBJECT" if blend_only else "TANGENT", body_mode=body_mode,
                                     rig_names=rig_names, expressions=expressions)
        finally:  # Ctrl-C or an error in the build leaves no posing behind the server's back
            stop_bodies(animation)
        return animation, result

    if maps_dir and rig == "relief":
        animation, result = run(None)  # maps in, relief armature out: no server at all
    elif maps_dir:
        from .core.errors import ServerStartError

        try:
            animation, result = _with_server(run, server, token)
        except ServerStartError as exc:  # only the body needed it: say how to do without
            raise ServerStartError(f"{exc} (the fitted body needs the inference server; rig='relief', "
                                   f"CLI --rig relief, animates the maps without one)",
                                   status=exc.status, detail=exc.detail) from exc
    else:
        animation, result = _with_server(run, server, token)
    result.animation = animation
    with contextlib.ExitStack() as stack:  # the joints file and the outputs: all or none
        if save_joints:
            joints_file.write(stack.enter_context(atomic_output(save_joints)), animation)
        result.written = _export.export_all(outputs or (), result.objects, animation=True)
    return result


def scan(inputs=(), *, maps_dir: str | os.PathLike | None = None, model: str = DEFAULT_MODEL,
         server: str | None = None, token: str | None = None, body: str = "clothed", rig_names: str = "anny",
         stride: int = 1, max_views: int | None = None, name: str | None = None, texture_size: int = 1024,
         progress=None, cancel_event=None) -> BuildResult:
    """One complete, textured, rigged body from several views of one person (docs/body.md, "Scan"):
    ``inputs`` a clip (video or a folder of frames) or two or more photos, analysed by the server;
    or ``maps_dir``, a folder of maps .npz (one per view, as ``analyze`` writes). Frames that add
    nothing are skipped (the person's report notes say which); ``max_views`` keeps that many,
    evenly spaced. The body is posed and placed as the first view kept, through its camera."""
    from .core.body.scan_views import ScanError, scan_frames
    from .core.remote.scan_calls import gather_scan
    from .blender.scan import build_scan

    frames, names = scan_frames(inputs, maps_dir, stride)

    def cancelled():
        if cancel_event is not None and cancel_event.is_set():
            raise ScanError("the scan was cancelled")

    template, fit, views, notes = _with_server(
        lambda client: gather_scan(client, frames, names, model, max_views, progress, cancel_event), server, token)
    cancelled()
    result = build_scan(template, fit, views, name=name or Path(maps_dir or next(iter(inputs), "scan")).stem,
                        mode=body, rig_names=rig_names, texture_size=texture_size, progress=progress,
                        cancel=cancelled)
    result.people[0].report.notes += notes
    return result
