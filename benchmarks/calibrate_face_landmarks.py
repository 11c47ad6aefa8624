# SPDX-License-Identifier: GPL-3.0-or-later
"""Calibrate which anny vertex each Goliath face keypoint is, by the offline backend's own face
model looking at anny's neutral face (inference_server/fit/face_landmarks.py, CALIBRATED).

The geometric picks (cavity rings, midline extremes, where the brow keys move the skin most) sit
up to 15 % of the face's height from where a face detector puts the same point on the same face
(the glabella: a geometric pick ~1.7 cm above the detector's; the brow tails ~4 % inwards). The
expression fit reads such an offset as an expression a neutral face does not make (spurious
brows). So: anny's neutral face (a few body shapes, each from 5 directions) is rendered with
Blender's Workbench, MediaPipe's face mesh (the wheel's model, the one the offline backend runs,
mapped onto Goliath names by backends/mediapipe_landmarks.py) finds its points, and each point's
vertex is the one whose projections lie nearest to what the detector found, over every render:
- lid centres and the inner lip points stay on their cavity's ring (an open mouth
  or a blink must move them as the lip or lid moves);
- midline points stay on the midline; a left point and its right twin are mirror vertices (anny
  is symmetric), chosen together.
Prints the table for face_landmarks.CALIBRATED and each point's distance before/after (in % of
the face's height, nasion to chin, on the renders).

    .venv/bin/python benchmarks/calibrate_face_landmarks.py [--out DIR]

Needs bpy and mediapipe (the offline backend's extra); about a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

# gender, age, muscle, weight, height, proportions (body_model.PHENOTYPE_NAMES)
SHAPES = {"average": (0.5, 0.5, 0.5, 0.5, 0.5, 0.5), "female": (0.0, 0.5, 0.5, 0.5, 0.5, 0.5),
          "male": (1.0, 0.5, 0.5, 0.5, 0.5, 0.5), "heavy older": (0.3, 0.8, 0.5, 0.8, 0.5, 0.5)}
VIEWS = ((0.0, 0.0), (12.0, 0.0), (-12.0, 0.0), (0.0, 8.0), (0.0, -8.0))  # yaw, pitch (degrees)
SIZE = 512  # render pixels
MARGIN = 0.005  # a pick moves when it brings the point this much nearer (face heights, rms)
DISTANCE = 0.8  # metres, 85 mm lens: the face fills about half the render


def render_views(bpy, rest, faces, centre, out_dir: Path | None, tag: str):
    """[(image uint8 [H,W,3], project: [V,3] -> [V,2] pixels, facing [V] bool)] per view."""
    from mathutils import Euler, Vector

    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    mesh = bpy.data.meshes.new("anny")
    mesh.from_pydata(rest.tolist(), [], faces.tolist())
    mesh.update()
    obj = bpy.data.objects.new("anny", mesh)
    scene = bpy.context.scene
    scene.collection.objects.link(obj)
    cam_data = bpy.data.cameras.new("cam")
    cam_data.lens = 85.0
    cam = bpy.data.objects.new("cam", cam_data)
    scene.collection.objects.link(cam)
    scene.camera = cam
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x = scene.render.resolution_y = SIZE
    scene.render.resolution_percentage = 100
    shading = scene.display.shading
    shading.light, shading.color_type = "STUDIO", "SINGLE"
    shading.single_color = (0.8, 0.6, 0.5)
    shading.show_cavity = shading.show_shadows = True
    normals = np.array([v.normal[:] for v in mesh.vertices])
    out = []
    for yaw, pitch in VIEWS:
        # the camera on a sphere around the face's centre, the face towards -y in the model frame
        rot = Euler((np.radians(90.0 + pitch), 0.0, np.radians(yaw)), "XYZ")
        cam.rotation_euler = rot
        look = rot.to_matrix() @ Vector((0.0, 0.0, -1.0))
        cam.location = Vector(centre) - look * DISTANCE
        path = Path(bpy.app.tempdir or "/tmp") / f"calib_{tag}_{yaw:+.0f}_{pitch:+.0f}.png"
        if out_dir is not None:
            path = out_dir / path.name
        scene.render.filepath = str(path)
        bpy.ops.render.render(write_still=True)
        from PIL import Image

        image = np.array(Image.open(path).convert("RGB"))
        world_to_cam = np.array(cam.matrix_world.inverted())
        f_px = cam_data.lens / cam_data.sensor_width * SIZE

        def project(p, w2c=world_to_cam, f=f_px):
            c = p @ w2c[:3, :3].T + w2c[:3, 3]
            return np.stack([SIZE / 2 + f * c[:, 0] / -c[:, 2], SIZE / 2 - f * c[:, 1] / -c[:, 2]], 1)

        cam_pos = np.array(cam.location[:])
        facing = ((cam_pos - rest) * normals).sum(1) > 0
        out.append((image, project, facing))
    return out


def detect(image: np.ndarray) -> dict[str, np.ndarray] | None:
    """{Goliath name: pixel} from MediaPipe's face mesh (the backend's mapping), None: no face."""
    import mediapipe as mp

    from inference_server.backends.mediapipe_landmarks import FACE_SHARED, FACE_TO_GOLIATH

    with mp.solutions.face_mesh.FaceMesh(static_image_mode=True, refine_landmarks=False, max_num_faces=1) as fm:
        res = fm.process(image)
    if not res.multi_face_landmarks:
        return None
    h, w = image.shape[:2]
    lm = np.array([(p.x * w, p.y * h) for p in res.multi_face_landmarks[0].landmark])
    table = {n: lm[i] for i, n in FACE_TO_GOLIATH.items()}
    table.update({n: lm[i] for n, i in FACE_SHARED.items()})
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="keep the renders here")
    args = ap.parse_args()
    import bpy

    from inference_server.fit import face_landmarks as fl
    from inference_server.fit.body_model import BodyModel
    from inference_server.fit.expressions import load_basis

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    body = BodyModel.load()
    model = body.anny
    basis = load_basis()
    template_rest = model.template_vertices.detach().cpu().double().numpy()
    geometric = fl.derive(model, template_rest, basis.names, basis.dense(len(template_rest)).astype(np.float64))
    names = sorted(geometric)
    faces = model.faces.cpu().numpy()
    head_f = fl._segment(model, "head")
    skin = np.unique(faces[head_f])
    rings = {"mouth": fl._ring(faces, head_f, fl._segment(model, "mouth_cavity")),
             "l": fl._ring(faces, head_f, fl._segment(model, "eye_cavity.L")),
             "r": fl._ring(faces, head_f, fl._segment(model, "eye_cavity.R"))}
    x = template_rest[:, 0]
    # each vertex's mirror twin (anny is left/right symmetric)
    from scipy.spatial import cKDTree

    twin = cKDTree(template_rest[skin]).query(template_rest[skin] * [-1.0, 1.0, 1.0])[1]
    mirror = np.full(len(template_rest), -1)
    mirror[skin] = skin[twin]

    def side(name: str) -> str | None:
        for k in ("l", "r"):
            if name.startswith(f"{k}_") or f"_{k}_" in name:
                return k
        return None

    def twin(name: str) -> str:
        return name[:2].replace("l_", "r_") + name[2:].replace("_l_", "_r_") if side(name) == "l" else name

    def candidates(name: str) -> np.ndarray:
        k = side(name)
        if "centerpoint_of" in name:  # the lids: on the eye's ring
            return rings[k]
        if "inner_lip" in name:  # on the mouth's ring, at the middle
            ring = rings["mouth"]
            return ring[np.abs(x[ring]) < 0.003]
        if "inner_corner_of_mouth" in name:
            ring = rings["mouth"]
            return ring[x[ring] > 0] if k == "l" else ring[x[ring] < 0]
        if k is None:
            return skin[np.abs(x[skin]) < fl.MIDLINE_M]
        return skin[(x[skin] > 0.005) if k == "l" else (x[skin] < -0.005)]

    def ring_point(name: str) -> bool:
        return any(k in name for k in ("centerpoint_of", "inner_lip", "inner_corner_of_mouth"))

    cost = {n: np.zeros(len(template_rest)) for n in names}
    raw = {n: np.zeros(len(template_rest)) for n in names}  # without the facing test: the report
    renders = 0
    for tag, phen in SHAPES.items():
        out = body.evaluate(np.zeros((1, len(body.bone_names), 3), np.float32), np.array([phen], np.float32),
                            np.eye(4, dtype=np.float32)[None])
        rest = out["rest_vertices"][0].astype(np.float64)
        centre = 0.5 * (rest[geometric["center_of_nose_root"]] + rest[geometric["tip_of_chin"]])
        for image, project, facing in render_views(bpy, rest, faces, centre, args.out, tag.replace(" ", "_")):
            found = detect(image)
            if found is None:
                print(f"{tag}: no face found in a render")
                continue
            renders += 1
            px = project(rest)
            height = np.linalg.norm(found["center_of_nose_root"] - found["tip_of_chin"])
            for n in names:
                d2 = ((px - found[n]) ** 2).sum(1) / height ** 2
                # a vertex turned away is never the point (the cavity rings' own normals point
                # into the cavity: they are not tested)
                cost[n] += d2 if ring_point(n) else np.where(facing, d2, 1.0)
                raw[n] += d2
    print(f"{renders} renders of {len(SHAPES)} shapes x {len(VIEWS)} views")
    picked: dict[str, int] = {}
    for n in names:
        if side(n) == "r":  # chosen with its left twin
            continue
        cand = candidates(n)
        if side(n) == "l":
            cand = cand[mirror[cand] >= 0]
            score = cost[n][cand] + cost[twin(n)][mirror[cand]]
        else:
            score = cost[n][cand]
        best = int(cand[np.argmin(score)])
        pair = [n, twin(n)] if side(n) == "l" else [n]
        now = [geometric[p] for p in pair]
        new = [best, int(mirror[best])] if side(n) == "l" else [best]
        # keep the geometric pick unless the detector's point is clearly nearer (a jitter margin)
        gain = np.sqrt(sum(raw[p][v] for p, v in zip(pair, now)) / (len(pair) * renders)) \
            - np.sqrt(sum(raw[p][v] for p, v in zip(pair, new)) / (len(pair) * renders))
        for p, v0, v1 in zip(pair, now, new):
            picked[p] = v1 if gain >= MARGIN else v0
    print(f"{'point':38s} geometric  calibrated  (rms distance to the detector, % face height)")
    for n in names:
        before = 100 * np.sqrt(raw[n][geometric[n]] / renders)
        after = 100 * np.sqrt(raw[n][picked[n]] / renders)
        print(f"{n:38s} {before:6.1f}     {after:6.1f}")
    print("\nCALIBRATED = {")
    for n in names:
        print(f'    "{n}": {picked[n]},')
    print("}")


if __name__ == "__main__":
    main()
