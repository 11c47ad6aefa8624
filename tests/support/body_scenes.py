# SPDX-License-Identifier: GPL-3.0-or-later
"""Fitted bodies with known truth: the fit's own body model (anny) evaluated for chosen poses,
shapes and placements, stored as a BodyTemplate + BodyFit, and ray-cast into exact maps.

Test-only code (torch, anny, trimesh): the product's Blender side never imports them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

import scenes
from sapiens_blender.core.body.records import BodyFit, BodyTemplate, attach_body
from sapiens_blender.core.body.surface import vertex_normals
from sapiens_blender.core.maps.goliath import PART_NAMES_SAPIENS2
from sapiens_blender.core.maps.canonical import Maps

# Rotation vectors (radians, each bone's rest frame, relative to its parent) per pose.
POSES = {
    "rest": {},
    "bent": {"upperarm01.L": (0.0, 0.0, 0.6), "lowerarm01.L": (-1.0, 0.0, 0.0),
             "upperarm01.R": (0.5, 0.0, 0.0), "lowerleg01.R": (0.7, 0.0, 0.0),
             "upperleg01.L": (-0.4, 0.0, 0.0), "neck01": (0.0, 0.0, 0.2)},
}
SHAPES = {"average": (0.5, 0.5, 0.5, 0.5, 0.5, 0.5), "heavy": (0.0, 0.5, 0.6, 0.85, 0.8, 0.5)}
# name -> list of people (pose, shape, yaw degrees, position of the body's centre in the camera)
SPECS = {
    "standing": [("bent", "average", 20.0, (0.0, 0.0, 3.2))],
    "rest": [("rest", "average", 0.0, (0.0, 0.0, 3.2))],
    "two": [("bent", "average", 10.0, (-0.45, 0.0, 3.4)), ("rest", "heavy", -15.0, (0.55, 0.05, 4.2))],
    "dressed": [("bent", "average", 0.0, (0.0, 0.0, 3.2))],
    "haired": [("rest", "average", 0.0, (0.0, 0.62, 1.5))],  # a head-and-shoulders view
}
DRESS = 0.025  # m: the dressed scene's clothing thickness over the torso and upper legs
DRESSED_PARTS = {"Torso": "Upper_Clothing", "Left_Upper_Leg": "Lower_Clothing",
                 "Right_Upper_Leg": "Lower_Clothing"}
FOCAL = {"haired": 600.0}  # px: the head and shoulders fill the frame (else the whole body is framed)
HAIR = 0.015  # m: the haired scene's hair thickness over the crown and the back of the head
HAIR_COLOUR, SKIN_COLOUR = (90, 60, 30), (200, 170, 150)


def hair_region(template: BodyTemplate, rest: np.ndarray) -> np.ndarray:
    """[V] bool: the haired scene's hair, on anny's rest pose (+z up, the face towards -y): the
    crown above the forehead, and the back half of the head down to the ears' top."""
    head = template.vertex_parts == template.part_names.index("Face_Neck")
    top = rest[head, 2].max()
    middle = 0.5 * (rest[head, 1].min() + rest[head, 1].max())
    return head & ((rest[:, 2] >= top - 0.05) | ((rest[:, 2] >= top - 0.12) & (rest[:, 1] >= middle)))


@dataclass
class BodyScene:
    maps: Maps  # with the template and the fit attached (extras)
    template: BodyTemplate
    fit: BodyFit


def _body_model():
    from inference_server.fit.body_model import BodyModel

    return BodyModel.load()


def _placement(yaw_deg: float, position, centre) -> np.ndarray:
    yaw = np.radians(yaw_deg)
    rz = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    rot = scenes.ANNY_TO_CAMERA @ rz
    out = np.eye(4)
    out[:3, :3] = rot
    out[:3, 3] = np.asarray(position, np.float64) - rot @ centre
    return out


def make(name: str, size=(320, 240)) -> BodyScene:
    body = _body_model()
    template = BodyTemplate.from_arrays(body.template())
    people = SPECS[name]
    n_bones = template.num_bones
    rot = np.zeros((len(people), n_bones, 3), np.float32)
    for i, (pose, _, _, _) in enumerate(people):
        for bone, vec in POSES[pose].items():
            rot[i, template.bone_names.index(bone)] = vec
    phen = np.array([SHAPES[shape] for _, shape, _, _ in people], np.float32)
    # Place each body so its posed centre lands at the given position.
    first = body.evaluate(rot, phen, np.tile(np.eye(4, dtype=np.float32), (len(people), 1, 1)))
    placement = np.stack([
        _placement(yaw, pos, 0.5 * (first["vertices"][i].min(0) + first["vertices"][i].max(0)))
        for i, (_, _, yaw, pos) in enumerate(people)]).astype(np.float32)
    out = body.evaluate(rot, phen, placement)
    n_joints = out["joints"].shape[1]
    fit = BodyFit(
        body_version=str(out["body_version"]), person_ids=np.arange(1, len(people) + 1, dtype=np.int32),
        phenotypes=out["phenotypes"], rest_vertices=out["rest_vertices"],
        rest_bone_matrices=out["rest_bone_matrices"], rest_bone_tails=out["rest_bone_tails"],
        bone_matrices=out["bone_matrices"], placement=out["placement"], vertices=out["vertices"],
        joints=out["joints"], joints_estimated=np.zeros((len(people), n_joints), bool),
        reports=tuple(json.dumps({"scene": name}) for _ in people),
    ).validate(template)
    maps = _render(template, fit, name, size)
    attach_body(maps, template, fit)
    return BodyScene(maps, template, fit)


def _render(template: BodyTemplate, fit: BodyFit, name: str, size) -> Maps:
    faces = template.faces.astype(np.int64)
    vparts = template.vertex_parts
    face_class = np.where(vparts[faces[:, 1]] == vparts[faces[:, 2]], vparts[faces[:, 1]], vparts[faces[:, 0]])
    bodies = []
    for i in range(len(fit.person_ids)):
        verts = fit.vertices[i].astype(np.float64)
        cls = face_class.copy()
        if name == "dressed":  # clothing: the torso and thighs pushed out and labelled as clothes
            names = template.part_names
            dressed_v = np.isin(vparts, [names.index(p) for p in DRESSED_PARTS])
            verts = verts + DRESS * dressed_v[:, None] * vertex_normals(verts, faces)
            for part, cloth in DRESSED_PARTS.items():
                cls[cls == names.index(part)] = PART_NAMES_SAPIENS2.index(cloth)
        if name == "haired":  # hair: the crown and the back of the head pushed out, labelled Hair
            hair_v = hair_region(template, fit.rest_vertices[i].astype(np.float64))
            verts = verts + HAIR * hair_v[:, None] * vertex_normals(verts, faces)
            cls[hair_v[faces].all(axis=1)] = PART_NAMES_SAPIENS2.index("Hair")
        joints = {n: fit.joints[i, j].astype(np.float64) for j, n in enumerate(template.joint_names)
                  if not n.endswith(("joint", "2", "3", "4"))}
        joints["neck"] = 0.5 * (joints["left_shoulder"] + joints["right_shoulder"])
        bodies.append(scenes.Body(verts, faces, cls, joints, 1.7))
    scene = scenes.render(bodies, size, focal=FOCAL.get(name))
    maps = scene.maps
    if name in ("dressed", "haired"):  # a photo with colours per class, shaded: what the texture bake carries over
        colours = {"Upper_Clothing": (70, 100, 170), "Lower_Clothing": (55, 55, 70), "Hair": HAIR_COLOUR}
        base = np.tile(np.array(SKIN_COLOUR, np.float64), maps.parts.shape + (1,))
        for cls, colour in colours.items():
            base[maps.parts == PART_NAMES_SAPIENS2.index(cls)] = colour
        shade = np.clip(np.nan_to_num(maps.normal[..., 2] * -1.0, nan=1.0), 0.3, 1.0)[..., None]
        image = np.where(maps.mask[..., None] > 0, base * (0.45 + 0.55 * shade), 40.0)
        maps.image = np.clip(image, 0, 255).astype(np.uint8)
    return maps
