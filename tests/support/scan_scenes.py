# SPDX-License-Identifier: GPL-3.0-or-later
"""Ground truth for the 360° scan (test-only): one dressed anny body turning once before a
fixed camera in N views, its colours differing front, sides and back, each view with noise.

- the pattern is carried by the body's vertices (worked out once on the body facing the camera):
  front red with a checker, its left side green with vertical bars, its right side blue with
  dots, the back yellow with horizontal stripes; so a wrong side shows as a wrong colour;
- per view: the body turned by 360 k / N degrees, the arms a few degrees off the first view's
  pose, keypoints 1.5 px and depth 5 mm of noise, a light that stays with the camera (shading by
  the surface's angle to it) and an exposure that differs per view (a gain per channel);
- ``camera="orbit"``: the camera goes round a person who stands still (the arms do not move),
  hand-held: its height (5-10 degrees up or down), distance (2.7-3.3 m) and aim (the person
  off the image's centre by up to 0.15 m) differ per view, the light still on the camera. The
  fit sees the same kind of thing (one relative placement per view), but the person is no longer
  upright in every view nor as large, and never centred.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import scene_variants
import scenes

POSE = {"upperarm01.L": ([0, 1, 0], -55), "lowerarm01.L": ([1, 0, 0], -40),
        "upperarm01.R": ([0, 1, 0], 55), "lowerarm01.R": ([1, 0, 0], -30)}


@dataclass
class ScanCase:
    views: list  # Maps per view (person 1)
    bodies: list  # scenes.Body per view, the dressed truth in that view's camera frame
    colours: np.ndarray  # [V,3] float 0..255: the pattern's albedo per vertex
    yaws: np.ndarray  # degrees per view
    height: float  # m, rest height of the (undressed) body
    gains: np.ndarray  # [V,3] the exposure each view was photographed with (view 0: 1)
    camera: str = "turn"  # "turn": the person turns before a fixed camera; "orbit": the camera goes round


def pattern(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Albedo [V,3] (0..255) of a body facing the camera (camera frame: x right, y down, the
    front towards -z), by where each vertex's normal points (round the vertical axis) and a
    motif per side."""
    import trimesh

    v = np.asarray(vertices, np.float64)
    n = np.asarray(trimesh.Trimesh(v, faces, process=False).vertex_normals)
    x, y, z = (v - np.median(v, axis=0)).T
    angle = np.degrees(np.arctan2(n[:, 0], -n[:, 2]))  # 0 facing the camera, +90 its right, 180 away
    front, back = np.abs(angle) < 50, np.abs(angle) > 130
    right = ~front & ~back & (angle > 0)
    out = np.where(front[:, None], [210.0, 50.0, 50.0], np.where(back[:, None], [230.0, 210.0, 60.0],
                   np.where(right[:, None], [50.0, 90.0, 220.0], [50.0, 190.0, 80.0])))
    checker = ((np.floor(x / 0.08) + np.floor(y / 0.08)) % 2 == 0)
    stripes = np.floor(y / 0.07) % 2 == 0
    bars = np.floor(z / 0.06) % 2 == 0
    dots = (np.floor(y / 0.05) % 2 == 0) & (np.floor(z / 0.05) % 2 == 0)
    dark = np.where(front, checker, np.where(back, stripes, np.where(right, dots, bars)))
    return out * np.where(dark, 0.55, 1.0)[:, None]


def _pose(k: int, wiggle_deg: float) -> dict:
    """The scan's pose, the arms turned a few degrees from the first view's (people move)."""
    d = wiggle_deg * np.sin(1.7 * k)
    out = dict(POSE)
    out["upperarm01.L"] = ([0, 1, 0], POSE["upperarm01.L"][1] + d)
    out["upperarm01.R"] = ([0, 1, 0], POSE["upperarm01.R"][1] - 0.7 * d)
    return out if k else dict(POSE)


def shade(body, colours) -> np.ndarray:
    """Per-vertex colour [V,3] under a light at the camera: albedo x (0.55 + 0.45 cos)."""
    import trimesh

    mesh = trimesh.Trimesh(body.vertices, body.faces, process=False)
    n = np.asarray(mesh.vertex_normals)
    view = -body.vertices / np.linalg.norm(body.vertices, axis=1, keepdims=True)
    cos = np.clip(np.einsum("ij,ij->i", n, view), 0.0, 1.0)
    return colours * (0.55 + 0.45 * cos)[:, None]


def paint(maps, body, vertex_colours: np.ndarray, gain=(1.0, 1.0, 1.0)) -> None:
    """Write the bodies' colours into ``maps.image`` where the mask shows it (ray-cast again for
    the triangle and barycentrics of each pixel)."""
    import trimesh
    from trimesh.ray.ray_pyembree import RayMeshIntersector

    h, w = maps.mask.shape
    k = np.asarray(maps.intrinsics, np.float64)
    mesh = trimesh.Trimesh(body.vertices, body.faces, process=False)
    rr, cc = np.mgrid[0:h, 0:w]
    dirs = np.stack([(cc + 0.5 - k[0, 2]) / k[0, 0], (rr + 0.5 - k[1, 2]) / k[1, 1], np.ones((h, w))], -1).reshape(-1, 3)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    tri, ray, loc = RayMeshIntersector(mesh).intersects_id(np.zeros_like(dirs), dirs, multiple_hits=False,
                                                           return_locations=True)
    bary = trimesh.triangles.points_to_barycentric(mesh.triangles[tri], loc)
    col = np.einsum("nk,nkc->nc", bary, vertex_colours[body.faces[tri]]) * np.asarray(gain)
    image = np.full((h * w, 3), 40.0)
    image[ray] = col
    maps.image = np.rint(image.reshape(h, w, 3)).clip(0, 255).astype(np.uint8)


def _orbit(body, k: int, distance: float, rng) -> "scenes.Body":
    """``body`` (turned by the view's azimuth, centred at ``distance``) as a hand-held camera
    going round it sees it in view ``k``: raised or lowered (the body tips about the camera's x
    axis through its centre), nearer or farther, aimed off the body. View 0 is the reference."""
    if k == 0:
        return body
    e = np.radians(rng.uniform(5.0, 10.0) * rng.choice([-1.0, 1.0]))
    tilt = np.array([[1, 0, 0], [0, np.cos(e), np.sin(e)], [0, -np.sin(e), np.cos(e)]])
    centre = np.array([0.0, 0.0, distance])
    to = centre + np.array([rng.uniform(-0.15, 0.15), rng.uniform(-0.1, 0.1), rng.uniform(-0.3, 0.3)])

    def move(p):
        return (np.asarray(p, np.float64) - centre) @ tilt.T + to
    return scenes.Body(move(body.vertices), body.faces, body.face_class,
                       {n: move(p) for n, p in body.joints.items()}, body.height)


def make(views: int = 12, size=(320, 240), shape: str = "average", distance: float = 3.0,
         wiggle_deg: float = 4.0, keypoint_px: float = 1.5, depth_m: float = 0.005, seed: int = 0,
         camera: str = "turn") -> ScanCase:
    """The turning body (``camera="turn"``) or the still body a camera goes round (``"orbit"``:
    the arms still, the camera's height, distance and aim differing per view) in ``views`` views
    of ``size`` (H, W)."""
    if camera not in ("turn", "orbit"):
        raise ValueError(f"camera must be 'turn' or 'orbit', not {camera!r}")
    rng = np.random.default_rng(seed)
    hand = np.random.default_rng(seed + 7919)
    yaws = 360.0 * np.arange(views) / views
    reference = scenes.pose_body(POSE, shape, 0.0, (0.0, 0.0, distance))
    colours = pattern(reference.vertices, reference.faces)
    out_views, bodies = [], []
    gains = np.ones((views, 3))
    gains[1:] = rng.uniform(0.88, 1.12, (views - 1, 3))
    for k, yaw in enumerate(yaws):
        pose = _pose(k, 0.0 if camera == "orbit" else wiggle_deg)
        body = scene_variants.dress(scenes.pose_body(pose, shape, float(yaw), (0.0, 0.0, distance)))
        if camera == "orbit":
            body = _orbit(body, k, distance, hand)
        scene = scenes.render([body], size, focal=_focal(size, distance))
        maps = scene_variants.degrade(scene_variants.with_clothing(scene.maps), keypoint_px=keypoint_px,
                                      depth_m=depth_m, seed=seed * 1000 + k)
        paint(maps, body, shade(body, colours), gain=gains[k])
        out_views.append(maps)
        bodies.append(body)
    return ScanCase(out_views, bodies, colours, yaws, reference.height, gains, camera)


def _focal(size, distance: float) -> float:
    """One focal length for every view (a fixed camera), framing a 2 m body with margin."""
    h, _w = size
    return 0.85 * (h / 2) * distance / 1.1
