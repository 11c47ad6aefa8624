# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the scene (or a build's objects) to .blend, .glb/.gltf or .fbx, atomically.

Every file is written under a temporary name in the target folder and moved into place with
``os.replace``: a crash or a kill never leaves a partial output, and an existing file is only
replaced by a complete one. Temporary names start with ``.`` and contain ``TEMP_MARK`` so an
interrupted batch can find and remove them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import bpy

from ..core.files.atomic import TEMP_MARK, atomic_output, disk_full_message, output_path, remove_stale_temp_files  # noqa: F401
from .body import interchange_weights
from .console import console_held_back
from .context import preserved_selection, select_only
from ..core.errors import SapiensError

FORMATS = {".blend": "blend", ".glb": "glb", ".gltf": "gltf", ".fbx": "fbx"}


class ExportError(SapiensError, RuntimeError):
    """The export failed or the output format is not supported; the message says which."""


def export_format(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ExportError(f"cannot export to {Path(path).name!r}: use one of {', '.join(FORMATS)}")
    return FORMATS[suffix]


def export(path: str | os.PathLike, objects: list | None = None, animation: bool = False) -> Path:
    """Export ``objects`` (default: the whole scene) to ``path``; the suffix picks the format.

    ``animation``: include the objects' actions (glTF animation channels, an FBX take per action).

    .blend always saves the whole file (a copy: the current file name is not changed).
    """
    path = output_path(path)  # not resolved: a link at the output is replaced, not followed
    export_format(path)
    with atomic_output(path) as tmp:
        _write(path, tmp, objects, animation)
    return path


def export_all(paths, objects: list | None = None, animation: bool = False) -> list[Path]:
    """Export to every path or to none: each is written to its temporary file first, and they
    replace their outputs only once every export has succeeded."""
    outputs = [output_path(p) for p in paths]
    for out in outputs:
        export_format(out)
    with contextlib.ExitStack() as stack:
        temps = [stack.enter_context(atomic_output(out)) for out in outputs]
        for out, tmp in zip(outputs, temps):
            _write(out, tmp, objects, animation)
    return outputs


def _write(path: Path, tmp: Path, objects, animation: bool = False) -> None:
    fmt = export_format(path)
    if fmt == "blend":
        try:
            with console_held_back():
                bpy.ops.wm.save_as_mainfile(filepath=str(tmp), copy=True, check_existing=False,
                                            compress=False)
        except RuntimeError as exc:  # e.g. a full disk: say so, not "cannot save"
            raise ExportError(_failure(path, tmp, exc, f"cannot write {path.name}")) from exc
    else:
        with preserved_selection() as view_layer:
            chosen = list(objects) if objects is not None else list(view_layer.objects)
            select_only(view_layer, chosen, chosen[0] if chosen else None)
            try:
                with interchange_weights(chosen):  # fitted bodies: <= 4 influences, renormalised
                    select_only(view_layer, chosen, chosen[0] if chosen else None)
                    with console_held_back():  # a failing exporter's traceback: our one line instead
                        if fmt in ("glb", "gltf"):
                            _export_gltf(tmp, fmt, animation)
                        else:
                            _export_fbx(path, tmp, animation)
            except RuntimeError as exc:  # the exporter's own traceback, as an operator error
                raise ExportError(_failure(path, tmp, exc, f"the {fmt} exporter failed for {path.name}")) from exc
    if not tmp.exists():
        raise ExportError(f"the {fmt} exporter wrote nothing for {path.name}")


_DISK_FULL = ("[Errno 28]", "No space left on device", "[Errno 122]", "Disk quota exceeded")


def _failure(path: Path, tmp: Path, exc: Exception, what: str) -> str:
    """One line for a failed save or export: a full disk said as such, else the last line of
    Blender's report (a Python exporter's comes with its whole traceback)."""
    text = str(exc)
    if any(mark in text for mark in _DISK_FULL):
        return disk_full_message(path)
    return f"{what}: {_disk_reason(tmp, exc)}"


def _disk_reason(tmp: Path, exc: Exception) -> str:
    """Blender reports a failed save as a RuntimeError naming the temporary file; the cause
    that matters to the user (disk full, no permission) is the folder's state."""
    folder = tmp.parent
    with contextlib.suppress(OSError):
        free = shutil.disk_usage(folder).free
        if free < 64 * 1024 * 1024:
            return f"the disk holding {folder} is full ({free // 1024} KiB free)"
    if not os.access(folder, os.W_OK):
        return f"{folder} is not writable"
    lines = [line.strip() for line in str(exc).splitlines()
             if line.strip() and not line.strip().startswith("Location:")]
    return lines[-1] if lines else type(exc).__name__


def _export_gltf(tmp: Path, fmt: str, animation: bool = False) -> None:
    result = bpy.ops.export_scene.gltf(
        filepath=str(tmp),
        export_format="GLB" if fmt == "glb" else "GLTF_EMBEDDED",
        use_selection=True,
        export_cameras=True,
        export_lights=False,
        export_extras=True,  # camera intrinsics + per-bone "estimated" flags
        export_yup=True,
        export_apply=False,
        export_skins=True,
        export_rest_position_armature=False,  # nodes carry the current pose; the bind pose is the rest
        export_animations=animation,
        # Every key as written (the action is baked already): no resampling, no simplification.
        export_force_sampling=False,
        export_optimize_animation_size=False,
        export_image_format="AUTO",
        export_tangents=True,  # the MikkTSpace frames the tangent-space normal texture was baked for
        # The face's expression keys as sparse morph targets, positions only: their normal deltas
        # reach every vertex of a primitive (10 MB for 52 keys; positions alone 0.8 MB).
        export_morph=True,
        export_morph_normal=False,
        export_try_sparse_sk=True,
    )
    if "FINISHED" not in result:
        raise ExportError(f"glTF export failed: {result}")


# The FBX header's creation time: fixed, so that the same scene gives the same bytes.
FBX_CREATION_TIME = (1970, 1, 1)


class _StableKey:
    """An FBX object key whose hash is the same in every process (Python salts str hashes)."""

    def __init__(self, key):
        self.key = key

    def __hash__(self):
        import hashlib

        return int.from_bytes(hashlib.blake2b(repr(self.key).encode(), digest_size=8).digest(), "little") >> 1


@contextlib.contextmanager
def _fbx_reproducible(path: Path, tmp: Path):
    """Yield the file name to give the FBX exporter: ``path`` itself, its bytes sent to ``tmp``.

    The exporter writes its file's own name into it (each embedded texture's folder
    ``<stem>.fbm``, absolute and relative: 34-62 times in a body's .fbx), the time of the export,
    and object ids made of Python's salted ``hash()`` of their names (different in every process,
    and cached for the process's life). Named as the output, at a fixed time, with ids from a
    stable hash and a fresh cache, the same scene gives the same bytes. Where the exporter's
    internals differ (another Blender), it writes ``tmp`` as it comes (the bytes then vary)."""
    try:
        import datetime

        from io_scene_fbx import encode_bin, export_fbx_bin, fbx_utils

        saved = (encode_bin.write, export_fbx_bin.fbx_header_elements, fbx_utils._key_to_uuid,
                 fbx_utils._keys_to_uuids, fbx_utils._uuids_to_keys)
    except (ImportError, AttributeError):
        yield tmp
        return
    real_write, real_header, real_uuid = saved[:3]
    final = os.path.abspath(path)

    def write(filepath, *args, **kwargs):  # the exporter's one write of the file
        return real_write(str(tmp) if os.path.abspath(filepath) == final else filepath, *args, **kwargs)

    def header(root, scene_data, time=None):
        return real_header(root, scene_data, time or datetime.datetime(*FBX_CREATION_TIME))

    def uuid(uuids, key):
        return real_uuid(uuids, key if isinstance(key, int) else _StableKey(key))

    encode_bin.write, export_fbx_bin.fbx_header_elements, fbx_utils._key_to_uuid = write, header, uuid
    fbx_utils._keys_to_uuids, fbx_utils._uuids_to_keys = {}, {}
    try:
        yield path
    finally:
        (encode_bin.write, export_fbx_bin.fbx_header_elements, fbx_utils._key_to_uuid,
         fbx_utils._keys_to_uuids, fbx_utils._uuids_to_keys) = saved


def _export_fbx(path: Path, tmp: Path, animation: bool = False) -> None:
    with _fbx_reproducible(path, tmp) as name:
        _run_fbx_exporter(name, animation)


def _run_fbx_exporter(filepath: Path, animation: bool) -> None:
    result = bpy.ops.export_scene.fbx(
        filepath=str(filepath),
        use_selection=True,
        object_types={"ARMATURE", "MESH", "CAMERA"},
        add_leaf_bones=False,
        path_mode="COPY",
        embed_textures=True,
        apply_unit_scale=True,
        bake_anim=animation,
        bake_anim_use_all_actions=False,  # a take per object's own action, not every action
        bake_anim_use_nla_strips=False,
        bake_anim_simplify_factor=0.0,  # keep a key per frame
    )
    if "FINISHED" not in result:
        raise ExportError(f"FBX export failed: {result}")

