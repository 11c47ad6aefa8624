# SPDX-License-Identifier: GPL-3.0-or-later
"""An :class:`core.motion.clip.Animation` -> Blender: the clip's camera, one armature per track
with a baked action (a key per frame), the scene's fps and frame range from the clip.

Keys are written with ``foreach_set`` on each F-curve's keyframe points (one call per channel,
not per key). Frame ``i`` of the animation (the i-th analysed frame) is scene frame
``frame_start + i``; the scene runs at the clip's fps divided by the stride. The armature
object sits at the origin: root motion is in the camera's frame, like every build.
Names: collection "Sapiens <name>", camera "Sapiens <name> camera", armature
"Sapiens <name> track <id>", action "Sapiens <name> track <id>" (the FBX take's name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import bpy
import numpy as np

from ..core.geometry.types import GeometryError
from ..core.motion.body_drive import NO_BODY_ERRORS, no_motion_note, summarise_source
from ..core.motion.clip import Animation, TrackAnimation
from ..core.motion.rig import BONE_NAMES
from .armature import build_armature
from .camera import build_camera


@dataclass
class AnimationResult:
    camera: bpy.types.Object
    collection: bpy.types.Collection
    armatures: list  # one armature object per track
    meshes: list  # the relief mesh skinned to each armature (when built)
    source: str  # "relief armature" (or "fitted body")
    frame_range: tuple[int, int]
    notes: list = field(default_factory=list)

    @property
    def objects(self) -> list:
        return [self.camera, *self.armatures, *self.meshes]


def build_animation(animation: Animation, name: str = "clip", *, background: str | Path | None = None,
                    frame_start: int = 1, scene: bpy.types.Scene | None = None, mesh: bool = True,
                    normal_space: str = "TANGENT", body_mode: str = "clothed",
                    rig_names: str = "anny", expressions: bool = True) -> AnimationResult:
    """Camera, armatures and baked actions for ``animation`` in ``scene``; ``background`` = the
    clip (a video file, or the first image of a sequence) shown behind the camera.

    A track with a fitted body (``track.body``, core/motion/body_drive.py) becomes that body
    (``body_mode`` 'clothed' or 'minimal', bones named by ``rig_names``, the ARKit face keys
    unless not ``expressions``) with its action. Other
    tracks: with ``mesh``, the armature of a relief build (``pipeline``) of the track's rest
    frame's maps, whose visible surface, skinned, moves with the action; else the armature alone.
    ``normal_space``: of the relief's normal texture ('TANGENT' for glTF/FBX, 'OBJECT' for Blender).
    """
    scene = scene or bpy.context.scene
    collection = bpy.data.collections.new(f"Sapiens {name}")
    scene.collection.children.link(collection)
    notes = list(animation.notes)
    camera = build_camera(animation.intrinsics, animation.width, animation.height,
                          f"Sapiens {name} camera", collection, scene=scene)
    if background is not None:
        try:
            attach_background(camera, Path(background), len(animation.frames), frame_start)
        except (RuntimeError, OSError) as exc:
            notes.append(f"the clip could not be set as the camera background: {exc}")
    set_scene_timing(scene, animation.fps, frame_start, len(animation.frames))
    position = {f: i for i, f in enumerate(animation.frames)}
    armatures, meshes = [], []
    for track in animation.tracks:
        label = f"Sapiens {name} track {track.id}"
        keys = frame_start + np.array([position[int(f)] for f in track.frames], np.float64)
        if track.body is not None:
            arm, body_mesh = _fitted_body(track, f"{name} track {track.id}", collection, body_mode, rig_names,
                                          expressions)
            try:
                track.body.settle()  # a deferred motion is waited for here, after the build
            except NO_BODY_ERRORS as exc:
                for obj in (body_mesh, arm):
                    bpy.data.objects.remove(obj)
                track.body = None
                notes.append(no_motion_note(track, exc))
                animation.notes.append(notes[-1])
            else:
                arm["sapiens_track"] = int(track.id)
                arm["sapiens_animation_source"] = track.source
                bake_body_track(arm, track.body, keys, label)
                if body_mesh.data.shape_keys is not None:
                    _key_face(track, body_mesh, keys, animation, f"{label} face", notes)
                armatures.append(arm)
                meshes.append(body_mesh)
                continue
        body = None
        if mesh and track.reference_maps is not None:
            try:
                body = _relief_body(track, f"{name} track {track.id}", collection, normal_space)
            except (GeometryError, ValueError) as exc:
                notes.append(f"track {track.id}: no relief mesh ({exc}); the armature alone is animated")
        if body is not None:
            arm, body_mesh = body
            meshes.append(body_mesh)
        else:
            arm = build_armature(track.rest.skeleton, label, collection)
        arm["sapiens_track"] = int(track.id)
        arm["sapiens_animation_source"] = track.source
        bake_track(arm, track, keys, label)
        armatures.append(arm)
    scene.frame_set(frame_start)
    animation.source = summarise_source(animation)
    return AnimationResult(camera, collection, armatures, meshes, animation.source,
                           (frame_start, frame_start + len(animation.frames) - 1), notes)


def _relief_body(track: TrackAnimation, name: str, collection, normal_space: str):
    """(armature, mesh) of a relief build of the track's rest frame, armature = the rest pose."""
    from ..core.motion.rig import rest_joints_dict
    from ..core.build.options import BuildOptions
    from .pipeline import build_from_maps

    pid = int(track.reference_person)
    result = build_from_maps(track.reference_maps, BuildOptions(
        name=name, people=[pid], joints={pid: rest_joints_dict(track.rest)}, make_active_camera=False,
        normal_space=normal_space, stride=2))
    person = result.people[0]
    # One camera for the clip: drop the build's own, keep its person collection under ours.
    root = result.collection
    collection.children.link(person.collection)
    for parent in [c for c in bpy.data.collections if person.collection.name in c.children and c is not collection]:
        parent.children.unlink(person.collection)
    for scene in bpy.data.scenes:
        if root.name in scene.collection.children:
            scene.collection.children.unlink(root)
    bpy.data.objects.remove(result.camera)
    bpy.data.collections.remove(root)
    return person.armature, person.mesh


def _fitted_body(track: TrackAnimation, name: str, collection, mode: str, rig_names: str,
                 expressions: bool = True):
    """(armature, mesh) of the track's fitted body, built like ``build --body`` from the fitted
    frame's maps (photo texture, part materials, clothing), the armature at that frame's place."""
    from .body import build_person_body

    tb = track.body
    body_mesh, arm, report, _images = build_person_body(
        tb.template, tb.fit, tb.person_id, track.reference_maps, mode=mode, rig_names=rig_names,
        label=f"Sapiens {name} body", collection=collection, expressions=expressions)
    arm["sapiens_body_fit"] = json.dumps(report.fit) if report.fit else "{}"
    return arm, body_mesh


def _key_face(track: TrackAnimation, body_mesh, keys: np.ndarray, animation: Animation, action_name: str,
              notes: list) -> None:
    """The track's expressions, fitted per frame and smoothed (core/motion/face.py), keyed on the
    body's shape keys; without face keypoints the photo's expression is kept (a note says so)."""
    from ..core.motion.face import track_expressions
    from .expressions import key_expressions

    values = track_expressions(track, animation.intrinsics, track.body.expression_lag)
    if values is None:
        notes.append(f"track {track.id}: no face keypoints per frame; the face keeps the fitted frame's expression")
        return
    key_expressions(body_mesh, track.body.template.expression_names, keys, values, action_name)
    body_mesh["sapiens_face_frames"] = int(np.count_nonzero(track.keypoints[..., 2].max(axis=1) > 0))


def bake_body_track(arm: bpy.types.Object, body, keys: np.ndarray, action_name: str):
    """One action on the fitted body's armature: every bone's rotation_quaternion and the root's
    location (the root motion), a key per frame. Bones in the template's order; the armature's
    names and hierarchy may be renamed (``rig_names``), the order is the same."""
    from ..core.body.rig_names import retarget_rig

    names, parents = retarget_rig(body.template.bone_names, body.template.bone_parents,
                                  arm.get("sapiens_rig_names", "anny"))
    quats, locs = body.pose_channels(parents)
    action = bpy.data.actions.new(action_name)
    action.use_fake_user = True
    arm.animation_data_create()
    arm.animation_data.action = action
    # Roots carry the motion through the clip; other heads ride on their parents, except where
    # a renamed rig re-parented a bone (its head then moves in its new parent's frame).
    keyed_location = (np.asarray(parents) < 0) | (np.abs(locs).max(axis=(0, 2)) > 1e-6)
    for b, bone in enumerate(names):
        arm.pose.bones[bone].rotation_mode = "QUATERNION"
        path = f'pose.bones["{bone}"].rotation_quaternion'
        for i in range(4):
            _channel(action, arm, path, i, keys, quats[:, b, i], bone)
        if keyed_location[b]:
            for i in range(3):
                _channel(action, arm, f'pose.bones["{bone}"].location', i, keys, locs[:, b, i], bone)
    return action


def set_scene_timing(scene, fps: float, frame_start: int, count: int) -> None:
    """Scene fps (integer fps with fps_base for fractional rates, e.g. 29.97) and range."""
    whole = max(1, int(round(fps)))
    scene.render.fps = whole
    scene.render.fps_base = whole / float(fps)
    scene.frame_start = frame_start
    scene.frame_end = frame_start + max(count, 1) - 1


def bake_track(arm: bpy.types.Object, track: TrackAnimation, keys: np.ndarray, action_name: str):
    """One action: rotation_quaternion of every body bone and the root's location, a key per frame."""
    action = bpy.data.actions.new(action_name)
    action.use_fake_user = True  # kept in a .blend even if unassigned later
    arm.animation_data_create()
    arm.animation_data.action = action
    quats = np.asarray(track.posed.quaternions, np.float64)  # [T,B,4]
    loc = np.asarray(track.posed.root_location, np.float64)  # [T,3]
    for b, bone in enumerate(BONE_NAMES):
        pb = arm.pose.bones[bone]
        pb.rotation_mode = "QUATERNION"
        path = f'pose.bones["{bone}"].rotation_quaternion'
        for i in range(4):
            _channel(action, arm, path, i, keys, quats[:, b, i], bone)
    root = BONE_NAMES[0]
    for i in range(3):
        _channel(action, arm, f'pose.bones["{root}"].location', i, keys, loc[:, i], root)
    return action


def _channel(action, owner, path: str, index: int, keys: np.ndarray, values: np.ndarray, group: str):
    fc = action.fcurve_ensure_for_datablock(owner, path, index=index, group_name=group)
    n = len(keys)
    fc.keyframe_points.add(n)
    co = np.empty(2 * n, np.float32)
    co[0::2], co[1::2] = keys, values
    fc.keyframe_points.foreach_set("co", co)
    fc.keyframe_points.foreach_set("interpolation", np.full(n, _LINEAR, np.int32))
    fc.update()


_LINEAR = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value


def attach_background(camera: bpy.types.Object, path: Path, frames: int, frame_start: int) -> None:
    """The clip behind the camera: a movie clip for a video, an image sequence for a folder."""
    cam = camera.data
    cam.show_background_images = True
    bg = cam.background_images.new()
    bg.alpha = 1.0
    bg.frame_method = "STRETCH"
    if path.is_dir() or path.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"):
        first = path if path.is_file() else _first_image(path)
        image = bpy.data.images.load(str(first), check_existing=True)
        image.source = "SEQUENCE"
        bg.source = "IMAGE"
        bg.image = image
        bg.image_user.frame_start = frame_start
        bg.image_user.frame_duration = frames
        bg.image_user.use_auto_refresh = True
    else:
        clip = bpy.data.movieclips.load(str(path), check_existing=True)
        clip.frame_start = frame_start
        bg.source = "MOVIE_CLIP"
        bg.clip = clip
        bg.use_camera_clip = False


def _first_image(folder: Path) -> Path:
    from ..core.motion.sources import IMAGE_SUFFIXES, _sorted_files

    return _sorted_files(folder, IMAGE_SUFFIXES, "images")[0]
