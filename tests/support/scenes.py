# SPDX-License-Identifier: GPL-3.0-or-later
"""Ground-truth scenes: a posed ``anny`` body ray-cast into EXACT canonical maps.

``anny`` (Apache-2.0 code, CC0 MakeHuman assets) is a skinned parametric human with a COCO joint
regressor. A scene poses it with a few bone rotations and a body shape, places it in front of a
pinhole camera and ray-casts it (trimesh + embreex) to get depth (camera Z), pointmap, normals
(towards the camera), the instance mask, part ids (each triangle's dominant bone mapped to the
Sapiens2 classes), the intrinsics, and Goliath-308 keypoints projected from the regressed 3D
joint centres. The ground-truth mesh and joints come back in the camera frame.

Loading anny builds a ~0.8 GB cache under ~/.cache/anny the first time (~80-120 s); load it
once per session with ``load_body_model()`` (module-level cache) or the session fixture.
Test-only code: the product never imports anny, torch or trimesh.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX, PART_NAMES_SAPIENS2
from sapiens_blender.core.maps.canonical import Maps

# anny model frame: X = the person's left, -Y = front, Z = up. Camera frame (OpenCV): x right,
# y down, z forward. A person facing the camera: x = X, y = -Z, z = Y (+ distance).
ANNY_TO_CAMERA = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])

# Rotations (axis in the bone's anny reference frame, degrees), found by probing the model.
POSES = {
    "rest": {},
    # Left arm raised sideways with the elbow bent forward; right knee bent; right arm forward.
    "arms_bent": {"upperarm01.L": ([0, 1, 0], -55), "lowerarm01.L": ([1, 0, 0], -70),
                  "upperarm01.R": ([1, 0, 0], -35), "lowerleg01.R": ([1, 0, 0], 50)},
    # Both arms raised, left leg stepping forward, knee bent.
    "arms_raised": {"upperarm01.L": ([0, 1, 0], -75), "upperarm01.R": ([0, 1, 0], 75),
                    "lowerarm01.R": ([1, 0, 0], -40), "upperleg01.L": ([1, 0, 0], -30),
                    "lowerleg01.L": ([1, 0, 0], 45)},
    # Right elbow bent, forearm coming forward in front of the body's side; left knee bent.
    "across": {"upperarm01.R": ([0, 0, 1], 40), "lowerarm01.R": ([0, 0.7071, 0.7071], 110),
               "upperarm01.L": ([0, 1, 0], -20), "lowerleg01.L": ([1, 0, 0], 35)},
    # Left arm raised sideways, right arm forward, both elbows (nearly) straight: anny's rest
    # bends them ~38 degrees, every other pose here bends them more.
    "arms_straight": {"upperarm01.L": ([0, 1, 0], -55), "lowerarm01.L": ([1, 0, 0], 36),
                      "upperarm01.R": ([1, 0, 0], -35), "lowerarm01.R": ([1, 0, 0], 30)},
    # Sitting (on nothing): thighs forward, knees bent 85 degrees; the pixels over the hips show
    # the thighs, centimetres in front of the hip joints.
    "sitting": {"upperleg01.L": ([1, 0, 0], -80), "upperleg01.R": ([1, 0, 0], -80),
                "lowerleg01.L": ([1, 0, 0], 85), "lowerleg01.R": ([1, 0, 0], 85)},
}

SHAPES = {
    "average": {},
    "heavy_tall": {"gender": 0.0, "weight": 0.85, "height": 0.8, "muscle": 0.6},
    "slim_short": {"gender": 1.0, "weight": 0.2, "height": 0.25, "age": 0.35},
    "very_tall": {"gender": 0.0, "height": 1.0},  # anny's tallest: 2.2 m
}

# The 23 COCO(+feet) joints of anny's regressor all have Goliath-308 slots of the same name.
COCO_NAMES = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
              "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
              "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
              "left_big_toe", "right_big_toe", "left_small_toe", "right_small_toe",
              "left_heel", "right_heel")


def _bone_class(bone: str) -> str:
    """Sapiens2 part class of an anny bone: the product's own table (inference_server.fit)."""
    from inference_server.fit.correspondences import part_of_bone

    return part_of_bone(bone)


# Keypoints anny regresses on (or just under) the skin, not at a joint centre; finger tips too.
_SKIN_POINTS = frozenset({"nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_big_toe",
                          "right_big_toe", "left_small_toe", "right_small_toe", "left_heel", "right_heel"}
                         | {f"{side}_{finger}4" for side in ("left", "right")
                            for finger in ("thumb", "forefinger", "middle_finger", "ring_finger", "pinky_finger")})


# Which part classes a keypoint may be seen on (otherwise it is occluded: low score).
def _visible_classes(name: str) -> tuple[str, ...]:
    from inference_server.fit.correspondences import is_finger

    side = "Left" if name.startswith("left") else "Right"
    if is_finger(name):
        return (f"{side}_Hand",)
    table = {
        "shoulder": ("Upper_Arm", "Torso"), "elbow": ("Upper_Arm", "Lower_Arm"),
        "wrist": ("Lower_Arm", "Hand"), "hip": ("Upper_Leg", "Torso"),
        "knee": ("Upper_Leg", "Lower_Leg"), "ankle": ("Lower_Leg", "Foot"),
        "big_toe": ("Foot",), "small_toe": ("Foot",), "heel": ("Foot",),
    }
    for key, classes in table.items():
        if name.endswith(key):
            return tuple(c if c == "Torso" else f"{side}_{c}" for c in classes)
    return ("Face_Neck",)


@functools.lru_cache(maxsize=1)
def load_body_model():
    """(anny model, COCO keypoint regressor), built once per process (float32, CPU)."""
    import anny

    from inference_server.fit.body_model import BodyModel

    model = BodyModel.load().anny  # the same instance the fit uses: loaded once per process
    return model, anny.KeypointsRegressor.coco(model)


@dataclass
class Body:
    """One posed body in the camera frame."""

    vertices: np.ndarray  # float64 [V,3]
    faces: np.ndarray  # int64 [F,3]
    face_class: np.ndarray  # int [F], Sapiens2 class id per triangle
    joints: dict  # COCO name -> xyz (camera frame, joint centres) + "neck" = mid shoulders (+ fingers)
    height: float  # metres, rest-pose standing height


@dataclass
class Scene:
    maps: Maps
    bodies: list  # Body per person (index k-1 = person k)
    visible: list  # per person {keypoint name: bool}
    info: dict = field(default_factory=dict)

    @property
    def body(self) -> Body:
        return self.bodies[0]


def pose_body(pose: str = "arms_bent", shape: str = "average", yaw_deg: float = 0.0,
              position=(0.0, 0.0, 3.0), hands: bool = False) -> Body:
    """Pose and shape the body, turn it by ``yaw_deg`` about its up axis, place its centre.

    ``pose``: a name of ``POSES`` or such a dict itself ({anny bone: (axis, degrees)}).
    ``hands``: the 40 finger joints too (Goliath's hand keypoints, as Sapiens finds them)."""
    import roma
    import torch

    model, regressor = load_body_model()
    pose_params = {}
    for bone, (axis, deg) in (POSES[pose] if isinstance(pose, str) else pose).items():
        m = torch.eye(4)[None]
        m[0, :3, :3] = roma.rotvec_to_rotmat(torch.tensor(axis, dtype=torch.float32) * np.radians(deg))
        pose_params[bone] = m
    phen = {k: torch.tensor([v]) for k, v in SHAPES[shape].items()} or None
    with torch.no_grad():
        out = model(pose_parameters=pose_params or None, phenotype_kwargs=phen)
        kp = regressor(out)[0].double().numpy()
        verts = out["vertices"][0].double().numpy()
        rest = out["rest_vertices"][0].double().numpy()
    height = float(rest[:, 2].max() - rest[:, 2].min())
    faces = model.faces.numpy().astype(np.int64)
    # Dominant bone per vertex, then per triangle (majority of its corners, else the first).
    w = model.vertex_bone_weights.numpy()
    idx = model.vertex_bone_indices.numpy()
    vbone = idx[np.arange(len(idx)), w.argmax(axis=1)]
    fb = vbone[faces]
    fbone = np.where(fb[:, 1] == fb[:, 2], fb[:, 1], fb[:, 0])
    class_of_bone = np.array([PART_NAMES_SAPIENS2.index(_bone_class(b)) for b in model.bone_labels])
    yaw = np.radians(yaw_deg)
    rz = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    centre = 0.5 * (verts.min(0) + verts.max(0))
    rot = ANNY_TO_CAMERA @ rz

    def place(p):
        return (p - centre) @ rot.T + np.asarray(position, np.float64)

    joints = {n: place(kp[i]) for i, n in enumerate(regressor.labels)}
    joints["neck"] = 0.5 * (joints["left_shoulder"] + joints["right_shoulder"])
    if hands:
        joints.update({n: place(p) for n, p in _finger_joints(out, phen).items()})
    return Body(place(verts), faces, class_of_bone[fbone], joints, height)


def _finger_joints(out: dict, phen: dict | None) -> dict:
    """Goliath's finger keypoints on a posed anny body (model frame): the posed heads of the
    finger bones (anny's own bone poses), and the finger tips: the last phalanx's tail
    carried by its bone (the tail as the fit defines it, body_model.rest_bones: on the bone's
    axis, as far as its farthest vertex)."""
    import torch

    from inference_server.fit.body_model import PHENOTYPE_NAMES, BodyModel
    from inference_server.fit.correspondences import JOINT_NAMES, JOINT_SOURCES, is_finger

    body = BodyModel.load()
    values = {n: 0.5 for n in PHENOTYPE_NAMES}
    values.update({k: float(v) for k, v in (phen or {}).items()})
    with torch.no_grad():
        coeffs = body.shape_coefficients(torch.tensor([[values[n] for n in PHENOTYPE_NAMES]], dtype=body.dtype))
        tails = body.rest_bones(coeffs)[1][0].double()
        posed, rest = out["bone_poses"][0].double(), out["rest_bone_poses"][0].double()
    joints = {}
    for name, (kind, bone) in zip(JOINT_NAMES, JOINT_SOURCES):
        if not is_finger(name):
            continue
        b = body.bone_index[bone]
        if kind == "head":
            joints[name] = posed[b, :3, 3].numpy()
        else:
            skin = posed[b] @ torch.linalg.inv(rest[b])  # the bone's rest -> posed transform
            joints[name] = (skin[:3, :3] @ tails[b] + skin[:3, 3]).numpy()
    return joints


def render(bodies: list, size=(320, 240), focal: float | None = None) -> Scene:
    """Ray-cast bodies (person k = bodies[k-1]) into exact canonical maps of ``size`` (H, W)."""
    import trimesh
    from trimesh.ray.ray_pyembree import RayMeshIntersector

    h, w = size
    allv = np.concatenate([b.vertices for b in bodies])
    if focal is None:  # frame everything with a small margin
        ext = np.abs(allv[:, :2] / allv[:, 2:3])
        focal = 0.92 * min((w / 2) / ext[:, 0].max(), (h / 2) / ext[:, 1].max())
    k = np.array([[focal, 0, w / 2], [0, focal, h / 2], [0, 0, 1]], np.float64)
    offsets = np.cumsum([0] + [len(b.vertices) for b in bodies])
    faces = np.concatenate([b.faces + offsets[i] for i, b in enumerate(bodies)])
    face_person = np.concatenate([np.full(len(b.faces), i + 1) for i, b in enumerate(bodies)])
    face_class = np.concatenate([b.face_class for b in bodies])
    mesh = trimesh.Trimesh(allv, faces, process=False)
    caster = RayMeshIntersector(mesh)

    rr, cc = np.mgrid[0:h, 0:w]
    dirs = np.stack([(cc + 0.5 - k[0, 2]) / k[0, 0], (rr + 0.5 - k[1, 2]) / k[1, 1], np.ones((h, w))], -1)
    dirs = dirs.reshape(-1, 3)
    tri, ray, loc = caster.intersects_id(np.zeros_like(dirs), dirs / np.linalg.norm(dirs, axis=1, keepdims=True),
                                         multiple_hits=False, return_locations=True)
    depth = np.full(h * w, np.nan)
    point = np.full((h * w, 3), np.nan)
    normal = np.full((h * w, 3), np.nan)
    mask = np.zeros(h * w, np.uint8)
    parts = np.zeros(h * w, np.uint8)
    depth[ray], point[ray] = loc[:, 2], loc
    fn = mesh.face_normals[tri]
    fn = np.where((np.einsum("ij,ij->i", fn, dirs[ray]) > 0)[:, None], -fn, fn)  # towards the camera
    normal[ray] = fn
    mask[ray] = face_person[tri]
    parts[ray] = face_class[tri]

    kp = np.zeros((len(bodies), 308, 3), np.float32)
    visible = []
    for i, body in enumerate(bodies):
        vis = {}
        for name, xyz in body.joints.items():
            u, v = k[0, 0] * xyz[0] / xyz[2] + k[0, 2], k[1, 1] * xyz[1] / xyz[2] + k[1, 2]
            col, row = int(np.floor(u)), int(np.floor(v))
            seen = False
            if 0 <= row < h and 0 <= col < w:
                p = row * w + col
                classes = [PART_NAMES_SAPIENS2.index(c) for c in _visible_classes(name)]
                seen = bool(mask[p] == i + 1 and parts[p] in classes and depth[p] < xyz[2] + 0.02)
                if name in _SKIN_POINTS:  # on the skin: seen only if the ray hits it there
                    seen = seen and abs(depth[p] - xyz[2]) < 0.03
                if name == "neck":
                    seen = bool(mask[p] == i + 1)
            vis[name] = seen
            inside = 0 <= u < w and 0 <= v < h
            kp[i, KEYPOINT_INDEX[name]] = (u, v, 1.0 if seen else (0.2 if inside else 0.0))
        visible.append(vis)
    image = np.full((h, w, 3), 40, np.uint8)
    image[mask.reshape(h, w) > 0] = (200, 170, 150)
    maps = Maps(image=image, mask=mask.reshape(h, w), parts=parts.reshape(h, w),
                part_names=PART_NAMES_SAPIENS2, normal=normal.reshape(h, w, 3).astype(np.float32),
                depth=depth.reshape(h, w).astype(np.float32), intrinsics=k.astype(np.float32),
                keypoints=kp, metric=True, source="groundtruth-anny",
                pointmap=point.reshape(h, w, 3).astype(np.float32)).validate()
    return Scene(maps, list(bodies), visible, {"focal": focal})


def make_scene(pose: str = "arms_bent", shape: str = "average", yaw_deg: float = 0.0,
               size=(320, 240), distance: float = 3.0) -> Scene:
    """One person, centred, ``distance`` metres from the camera."""
    return render([pose_body(pose, shape, yaw_deg, (0.0, 0.0, distance))], size)


def make_two_people_scene(size=(240, 320)) -> Scene:
    """Two people side by side at different depths (person 2 partly behind person 1)."""
    a = pose_body("arms_bent", "average", 10.0, (-0.35, 0.0, 3.0))
    b = pose_body("arms_raised", "slim_short", -15.0, (0.55, 0.1, 3.8))
    return render([a, b], size)


def sample_surface(vertices, faces, points_per_m2: float = 40000.0, seed: int = 0) -> np.ndarray:
    """Area-weighted random points on a triangle mesh."""
    v, f = np.asarray(vertices, np.float64), np.asarray(faces)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    n = max(1000, int(area.sum() * points_per_m2))
    rng = np.random.default_rng(seed)
    tri = rng.choice(len(f), size=n, p=area / area.sum())
    r1, r2 = rng.random(n), rng.random(n)
    s = np.sqrt(r1)
    return (1 - s)[:, None] * a[tri] + (s * (1 - r2))[:, None] * b[tri] + (s * r2)[:, None] * c[tri]


def visible_points(scene: Scene, supersample: int = 2) -> np.ndarray:
    """The ground truth's visible surface: ray hits at ``supersample`` x the maps' resolution
    (independent of the maps' own pixels), per person: list of [N,3] arrays."""
    import trimesh
    from trimesh.ray.ray_pyembree import RayMeshIntersector

    k = np.asarray(scene.maps.intrinsics, np.float64)
    h, w = scene.maps.height * supersample, scene.maps.width * supersample
    offsets = np.cumsum([0] + [len(b.vertices) for b in scene.bodies])
    faces = np.concatenate([b.faces + offsets[i] for i, b in enumerate(scene.bodies)])
    owner = np.concatenate([np.full(len(b.faces), i) for i, b in enumerate(scene.bodies)])
    mesh = trimesh.Trimesh(np.concatenate([b.vertices for b in scene.bodies]), faces, process=False)
    rr, cc = np.mgrid[0:h, 0:w]
    dirs = np.stack([((cc + 0.5) / supersample - k[0, 2]) / k[0, 0],
                     ((rr + 0.5) / supersample - k[1, 2]) / k[1, 1], np.ones((h, w))], -1).reshape(-1, 3)
    tri, _ray, loc = RayMeshIntersector(mesh).intersects_id(
        np.zeros_like(dirs), dirs / np.linalg.norm(dirs, axis=1, keepdims=True),
        multiple_hits=False, return_locations=True)
    return [loc[owner[tri] == i] for i in range(len(scene.bodies))]


def hit_normals(scene: Scene) -> np.ndarray:
    """Ground-truth unit normals [H,W,3] (towards the camera) from the mesh's own triangles,
    recomputed here rather than read back from the maps; NaN off the bodies."""
    import trimesh
    from trimesh.ray.ray_pyembree import RayMeshIntersector

    k = np.asarray(scene.maps.intrinsics, np.float64)
    h, w = scene.maps.height, scene.maps.width
    offsets = np.cumsum([0] + [len(b.vertices) for b in scene.bodies])
    faces = np.concatenate([b.faces + offsets[i] for i, b in enumerate(scene.bodies)])
    v = np.concatenate([b.vertices for b in scene.bodies])
    mesh = trimesh.Trimesh(v, faces, process=False)
    rr, cc = np.mgrid[0:h, 0:w]
    dirs = np.stack([(cc + 0.5 - k[0, 2]) / k[0, 0], (rr + 0.5 - k[1, 2]) / k[1, 1], np.ones((h, w))], -1).reshape(-1, 3)
    tri, ray = RayMeshIntersector(mesh).intersects_id(np.zeros_like(dirs), dirs, multiple_hits=False)
    f = faces[tri]
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    n = np.where((np.einsum("ij,ij->i", n, dirs[ray]) > 0)[:, None], -n, n)
    out = np.full((h * w, 3), np.nan)
    out[ray] = n
    return out.reshape(h, w, 3)


SHAPES["child"] = {"age": 0.2, "height": 0.45, "gender": 0.3}
