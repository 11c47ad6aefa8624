# SPDX-License-Identifier: GPL-3.0-or-later
"""bench_real.py's focal sweep: the 3D frames' fit again at ``--focal-scales`` times the assumed focal.

A photo's focal length is unknown; the offline backend assumes 0.75 x the long side
(processing/intrinsics.py; mpi_inf_3dhp's cameras are 0.73). Its maps scale with the focal in
one way only: the person's distance (weak perspective, f / scale), with the landmark depths and
the silhouette's bulge (metres per pixel = distance / f) unchanged. So the maps of another focal
are the built ones with K's focal x c and the depth + (c - 1) x the person's distance (here the
median depth of their mask: the hips' own distance is not kept, a few cm off, uniformly), and the
body is fitted again in this process (the server's fit, FitSettings' defaults, one thread).

Also, per frame, the focal that a perspective fit of MediaPipe's metric world landmarks to its
own 2D keypoints prefers (translation solved linearly for each focal on a grid): where the
landmarks' depths were exact this would give the focal; the table says whether they are.
"""

from __future__ import annotations

import numpy as np

from bench_real import GOLIATH_INDEX, LIMB_JOINTS, built_name, pa_mpjpe, person_error, project

FOCAL_GRID = np.linspace(0.3, 3.0, 271)  # focal / long side searched by the landmark fit


def landmark_focal(keypoints: np.ndarray, world: np.ndarray, centre, long_side: int,
                   min_score: float = 0.5) -> tuple[float | None, float]:
    """(focal / long side with the lowest reprojection rms of ``world`` [308,4] (metres, camera
    axes, score) onto ``keypoints`` [308,3] (px, score), the rms in px); None with < 6 points.
    A focal at the grid's end means the landmarks prefer no perspective at all."""
    ok = np.isfinite(world).all(1) & (world[:, 3] > min_score) & (keypoints[:, 2] > min_score)
    if ok.sum() < 6:
        return None, float("nan")
    uv, xyz = keypoints[ok, :2] - np.asarray(centre, np.float64), world[ok, :3]
    best = (float("inf"), None)
    for c in FOCAL_GRID:
        f = c * long_side
        # (u - cx)(Z + tz) = f (X + tx), likewise v: linear in the translation t
        a = np.zeros((2 * len(xyz), 3))
        a[0::2, 0] = a[1::2, 1] = f
        a[0::2, 2], a[1::2, 2] = -uv[:, 0], -uv[:, 1]
        b = np.empty(2 * len(xyz))
        b[0::2] = uv[:, 0] * xyz[:, 2] - f * xyz[:, 0]
        b[1::2] = uv[:, 1] * xyz[:, 2] - f * xyz[:, 1]
        t = np.linalg.lstsq(a, b, rcond=None)[0]
        p = xyz + t
        if (p[:, 2] <= 0).any():
            continue
        rms = float(np.sqrt(((f * p[:, :2] / p[:, 2:3] - uv) ** 2).sum(1).mean()))
        best = min(best, (rms, float(c)))
    return best[1], best[0]


def sweep(photos: list, out, scales: list[float]) -> tuple[str, list[dict]]:
    """The table (markdown) and rows: per frame and focal scale, the refitted body's PA-MPJPE
    (mm) and 2D error (% of the person's size), beside the maps' own 3D landmarks (keypoints_3d,
    of the backend's person nearest the label: what the fit was given)."""
    import torch

    from inference_server.fit.body_model import BodyModel
    from inference_server.fit.correspondences import JOINT_NAMES
    from inference_server.fit.observations import observe
    from inference_server.fit.solver import FitSettings, fit_people

    torch.set_grad_enabled(True)
    body = BodyModel.load("cpu")
    rows = []
    for photo in photos:
        path = out / f"{built_name(photo)}.npz"
        if photo.truth3d is None or not path.is_file():
            continue
        with np.load(path) as z:
            m = {k: z[k] for k in ("image", "mask", "parts", "part_names", "intrinsics", "keypoints",
                                   "keypoints_3d", "depth", "metric")}
        hm, wm = m["image"].shape[:2]
        label, to_photo = photo.labels[0], np.array([photo.hw[1] / wm, photo.hw[0] / hm])
        # the backend's person nearest the label in 2D (a frame may hold several)
        pid = 1 + int(np.argmin([person_error({n: kp[i, :2] * to_photo for n, i in GOLIATH_INDEX.items() if kp[i, 2] > 0},
                                              label.points, label.size)[0] for kp in m["keypoints"]]))
        est, rms = landmark_focal(m["keypoints"][pid - 1], m["keypoints_3d"][pid - 1], m["intrinsics"][:2, 2],
                                  max(hm, wm))
        k3 = m["keypoints_3d"][pid - 1]
        mp = np.array([k3[GOLIATH_INDEX[n], :3] for n in LIMB_JOINTS])
        row = {"key": photo.key, "person": pid, "landmark_focal": est, "landmark_rms_px": round(rms, 1),
               "true_focal": None if photo.focal is None else round(photo.focal / max(photo.hw), 3),
               "mp_pa_mm": round(1000 * pa_mpjpe(mp, photo.truth3d), 1), "fits": {}}
        distance = float(np.nanmedian(m["depth"][m["mask"] == pid]))
        for c in scales:
            k = m["intrinsics"].astype(np.float64).copy()
            k[:2, :2] *= c
            depth = (m["depth"] + (c - 1.0) * distance).astype(np.float32)
            obs = observe(pid, mask=m["mask"], parts=m["parts"], part_names_in=m["part_names"], intrinsics=k,
                          keypoints=m["keypoints"], depth=depth, pointmap=None, metric=m["metric"],
                          keypoints_3d=m["keypoints_3d"])
            joints = fit_people(body, [obs], FitSettings())["joints"][0]
            pred = np.array([joints[JOINT_NAMES.index(n)] for n in LIMB_JOINTS])
            uv = project(pred, k) * to_photo
            err = person_error(dict(zip(LIMB_JOINTS, map(tuple, uv))), label.points, label.size)[0]
            row["fits"][c] = (round(1000 * pa_mpjpe(pred, photo.truth3d), 1), round(100 * err, 1))
            print(f"  focal x{c:g} {photo.key}: PA-MPJPE {row['fits'][c][0]} mm, 2D {row['fits'][c][1]} %", flush=True)
        rows.append(row)
    head = "| frame | true f | landmarks' f (rms px) | backend keypoints_3d PA | " + \
        " | ".join(f"fit x{c:g} PA / 2D" for c in scales) + " |"
    lines = [head, "|" + "---|" * (4 + len(scales))]
    for r in rows:
        lf = "none" if r["landmark_focal"] is None else f"{r['landmark_focal']:.2f} ({r['landmark_rms_px']})"
        lines.append(f"| {r['key'].split('__')[-1]} | {r['true_focal']} | {lf} | {r['mp_pa_mm']} | " +
                     " | ".join(f"{r['fits'][c][0]} / {r['fits'][c][1]} %" for c in scales) + " |")
    if rows:
        mean = lambda i, c: np.mean([r["fits"][c][i] for r in rows])  # noqa: E731
        lines.append(f"| **mean** | | | {np.mean([r['mp_pa_mm'] for r in rows]):.1f} | " +
                     " | ".join(f"{mean(0, c):.1f} / {mean(1, c):.1f} %" for c in scales) + " |")
    return "\n".join(lines), rows
