# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens post-processing alone, at full photo size: the previous host code path against the
current one, on the same model outputs, in one run.

What a GPU server does per photo after the forwards (sapiens_pipeline.py): people from the
segmentation, the intrinsics fit from the pointmap, the depth-derived normals and the normal-sign
calibration, the NaN-masked maps, and for each person the pose flip-back, averaging and DARK
decoding of 308 heatmaps (256x192 for the released 1024x768 models). The model outputs are
synthetic (a bumpy tilted surface seen through a known camera, one Gaussian peak per keypoint)
and start on ``--device``, where a model would leave them.

- before: the code as of commit ecfb498 (kept below as the baseline): every map copied to the host
  as the forwards left it (int64 labels, strided points/normals, float32 heatmaps), then numpy
  (least-squares fit over a float64 copy of the pointmap, np.cross normals, float64 calibration,
  flip-back and averaging of full heatmaps, float64 blur of every heatmap);
- now: the pipeline's own functions: uint8 labels copied, people on the host (scipy), the masks
  to the device, intrinsics/normals/calibration/masking in torch there (processing/dense_torch.py),
  flip-back/averaging/decoding there (heatmaps.decode_heatmaps_torch); only the final maps and
  the keypoints come back.

    .venv/bin/python benchmarks/bench_sapiens_post.py                 # CPU here; CUDA when present
    .venv/bin/python benchmarks/bench_sapiens_post.py --device cuda --repeats 20

Prints the median seconds per stage and photo of both paths and the ratio; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STAGES = ("segmentation", "depth", "normals", "pose")


# --- the previous implementation (commit ecfb498), the baseline ---------------------------------
def _before_fit_intrinsics(pointmap, valid):
    pts = np.asarray(pointmap, np.float64)
    z = pts[..., 2]
    ok = np.isfinite(pts).all(-1) & (z > 1e-6) & np.asarray(valid, bool)
    if ok.sum() < 32:
        return None, float("nan")
    rows, cols = np.nonzero(ok)
    a, b = pts[rows, cols, 0] / z[rows, cols], pts[rows, cols, 1] / z[rows, cols]
    fits = []
    for ray, pix in ((a, cols + 0.5), (b, rows + 0.5)):
        if np.std(ray) < 1e-6:
            return None, float("nan")
        (f, c), *_ = np.linalg.lstsq(np.stack([ray, np.ones_like(ray)], -1), pix, rcond=None)
        fits.append((f, c, pix - (f * ray + c)))
    (fx, cx, ru), (fy, cy, rv) = fits
    return np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], np.float32), float(np.sqrt(np.mean(ru**2 + rv**2)))


def _before_normalize(v):
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = v / norm
    out[~np.isfinite(norm[..., 0]) | (norm[..., 0] < 1e-12)] = np.nan
    return out


def _before_normals_from_points(points, valid):
    p = np.asarray(points, np.float32)
    h, w = p.shape[:2]
    ok = np.isfinite(p).all(-1) & np.asarray(valid, bool)
    out = np.full((h, w, 3), np.nan, np.float32)
    n = -np.cross(p[1:-1, 2:] - p[1:-1, :-2], p[2:, 1:-1] - p[:-2, 1:-1])
    n[~(ok[1:-1, 1:-1] & ok[1:-1, 2:] & ok[1:-1, :-2] & ok[2:, 1:-1] & ok[:-2, 1:-1])] = np.nan
    out[1:-1, 1:-1] = _before_normalize(n)
    return out


def _before_calibrate(pred, ref, valid):
    ok = np.isfinite(pred).all(-1) & np.isfinite(ref).all(-1) & np.asarray(valid, bool)
    a, b = pred[ok].astype(np.float64), ref[ok].astype(np.float64)
    per_axis = (a * b).mean(0)
    best = max(itertools.product((1.0, -1.0), repeat=3), key=lambda s: float(np.dot(s, per_axis)))
    if float(np.dot(best, per_axis)) - float(per_axis.sum()) < 0.05:
        best = (1.0, 1.0, 1.0)
    angle = lambda d: float(np.degrees(np.arccos(np.clip(d, -1.0, 1.0))).mean())  # noqa: E731
    return best, angle((a * np.asarray(best) * b).sum(-1)), angle((a * b).sum(-1)), int(ok.sum())


def _before_decode(hm_in):
    from inference_server.processing.heatmaps import gaussian_blur_keep_max

    hm = np.asarray(hm_in, np.float64)
    n, k, h, w = hm.shape
    flat = hm.reshape(n, k, -1)
    score, idx = flat.max(-1), flat.argmax(-1)
    xy = np.stack([idx % w, idx // w], -1).astype(np.float64)
    logs = np.log(np.clip(gaussian_blur_keep_max(hm), 1e-3, 50.0))  # every pixel of every map
    padded = np.pad(logs, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="edge")
    xi, yi = xy[..., 0].astype(np.int64) + 1, xy[..., 1].astype(np.int64) + 1
    ni, ki = np.meshgrid(np.arange(n), np.arange(k), indexing="ij")
    at = lambda dy, dx: padded[ni, ki, yi + dy, xi + dx]  # noqa: E731
    c = at(0, 0)
    gx, gy = 0.5 * (at(0, 1) - at(0, -1)), 0.5 * (at(1, 0) - at(-1, 0))
    hxx = at(0, 1) - 2 * c + at(0, -1) + np.finfo(np.float32).eps
    hyy = at(1, 0) - 2 * c + at(-1, 0) + np.finfo(np.float32).eps
    hxy = 0.5 * (at(1, 1) - at(0, 1) - at(1, 0) + 2 * c - at(0, -1) - at(-1, 0) + at(-1, -1))
    det = hxx * hyy - hxy * hxy
    safe = np.abs(det) > 1e-12
    det = np.where(safe, det, 1.0)
    dx = np.where(safe, (hyy * gx - hxy * gy) / det, 0.0)
    dy = np.where(safe, (-hxy * gx + hxx * gy) / det, 0.0)
    ok = (np.abs(dx) <= 1.0) & (np.abs(dy) <= 1.0)
    out = np.where(score[..., None] > 0, xy - np.where(ok[..., None], np.stack([dx, dy], -1), 0.0), -1.0)
    return out.astype(np.float32), score.astype(np.float32)


def before(outputs):
    """The previous per-photo post-processing: (seconds per stage, keypoints)."""
    from scipy import ndimage

    from inference_server.processing import instances
    from inference_server.processing.goliath import FLIP_PAIRS
    from inference_server.processing.heatmaps import flip_back

    sec = {}
    t0 = time.perf_counter()
    parts = outputs.seg_logits.argmax(1)[0].cpu().numpy().astype(np.uint8)  # int64 labels copied
    people = instances.label_people(parts > 0)
    instances.person_boxes(people)
    fg = people > 0
    inner = ndimage.binary_erosion(fg, iterations=2)
    np.where(people > 0, parts, 0).astype(np.uint8)
    sec["segmentation"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    points = outputs.points.cpu().numpy()  # [H,W,3] strided, as the runner returned it
    _before_fit_intrinsics(points, inner)
    np.where(fg, points[..., 2], np.nan).astype(np.float32)
    np.where(fg[..., None], points, np.nan).astype(np.float32)
    sec["depth"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    predicted = outputs.normals.cpu().numpy()
    signs = np.float32([1, -1, -1])
    ref = _before_normals_from_points(points, inner)
    best, *_ = _before_calibrate(predicted * signs, ref, inner)
    np.where(fg[..., None], predicted * signs * np.float32(best), np.nan).astype(np.float32)
    sec["normals"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    hm = outputs.heatmaps.cpu().numpy()
    flipped = flip_back(outputs.heatmaps_of_flipped.cpu().numpy(), FLIP_PAIRS)
    hm = np.where(np.ones((len(hm), 1, 1, 1), bool), 0.5 * (hm + flipped), hm)
    keypoints = _before_decode(hm)
    sec["pose"] = time.perf_counter() - t0
    return sec, keypoints


def now(outputs):
    """The pipeline's current per-photo post-processing (its own functions): (seconds per stage,
    keypoints)."""
    import torch

    from inference_server.backends import sapiens_pipeline as sp
    from inference_server.dataplane.base import AnalyzeOptions
    from inference_server.processing import heatmaps
    from inference_server.processing.goliath import FLIP_PAIRS
    from inference_server.processing.resize_pad import class_labels

    runner = SimpleNamespace(source="bench", metric=True, normal_signs=(1.0, -1.0, -1.0))
    dev = outputs.points.device
    h, w = outputs.points.shape[:2]
    p = sp._Photo(np.zeros((h, w, 3), np.uint8), AnalyzeOptions(), sp.no_progress, None)
    p.grid, p.photo, p.boxes, p.tasks, p.depth_for_normals = p.image, torch.zeros((1, 3, 1, 1), device=dev), \
        None, ("seg", "depth", "normal", "pose"), False
    sec = {}
    t0 = time.perf_counter()
    parts = class_labels(outputs.seg_logits)  # what the runners hand over
    sp._after_segmentation(runner, p, parts, None, "benchmark")
    sec["segmentation"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sp._after_depth(runner, p, outputs.points)
    sec["depth"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sp._after_normals(runner, p, outputs.normals)
    sec["normals"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    hm = 0.5 * (outputs.heatmaps + heatmaps.flip_back_torch(outputs.heatmaps_of_flipped, FLIP_PAIRS))
    keypoints = heatmaps.decode_heatmaps_torch(hm)
    sec["pose"] = time.perf_counter() - t0
    return sec, keypoints


def model_outputs(photo_hw, people: int, device, foreground: str):
    """Deterministic stand-ins for the four models' outputs, on ``device``."""
    import torch

    from inference_server.processing import heatmaps

    h, w = photo_hw
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    f = 0.75 * max(h, w)
    depth = 2.5 + 0.0005 * xx - 0.0003 * yy - 0.3 * np.exp(-((xx - w / 2) ** 2 + (yy - h / 2) ** 2) / (0.1 * h * w))
    points = np.stack([(xx + 0.5 - w / 2) / f * depth, (yy + 0.5 - h / 2) / f * depth, depth], -1).astype(np.float32)
    points += rng.normal(0, 0.001, points.shape).astype(np.float32)
    logits = np.zeros((1, 29, h, w), np.float32)
    if foreground == "full":  # what the random-weight models of bench_sapiens.py segment
        logits[0, 22] = 1.0
    else:  # one upright person-sized ellipse
        logits[0, 22] = (((xx - w / 2) / (0.2 * w)) ** 2 + ((yy - h / 2) / (0.42 * h)) ** 2 <= 1).astype(np.float32)
    normals = np.random.default_rng(1).normal(size=points.shape).astype(np.float32)
    normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
    hh, hw = 256, 192
    maps = np.stack([np.stack([heatmaps.gaussian_heatmap((hh, hw), rng.uniform(2, [hw - 3, hh - 3]), 2.0)
                               for _ in range(308)]) for _ in range(people)]).astype(np.float32)
    maps += rng.random(maps.shape, np.float32) * 0.05
    on = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    return SimpleNamespace(seg_logits=on(logits), points=on(points), normals=on(normals), heatmaps=on(maps),
                           heatmaps_of_flipped=on(maps[..., ::-1].copy()))


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--photo", default="1024x768", help="photo (maps grid) HxW")
    ap.add_argument("--people", type=int, default=1, help="people in the photo (pose crops)")
    ap.add_argument("--foreground", default="full", choices=("full", "person"),
                    help="full: the whole photo is the person (as bench_sapiens.py's random-weight models); "
                         "person: an upright person-sized ellipse")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per path (after one warm-up)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    photo_hw = tuple(int(v) for v in args.photo.lower().split("x"))
    outputs = model_outputs(photo_hw, args.people, args.device, args.foreground)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    paths = {"before": before, "now": now}
    runs = {name: [] for name in paths}
    keypoints = {}
    for rep in range(args.repeats + 1):  # interleaved: load on the machine hits both alike
        for name, fn in paths.items():
            sync()
            sec, keypoints[name] = fn(outputs)
            sync()
            if rep:
                runs[name].append(sec)
    # the two paths agree (float rounding): a benchmark of a wrong answer measures nothing
    agree = float(np.abs(keypoints["before"][0] - keypoints["now"][0]).max())
    assert agree < 1e-3, f"keypoints differ by {agree} heatmap pixels"
    table = {name: {s: float(np.median([r[s] for r in rs])) for s in STAGES} for name, rs in runs.items()}
    for t in table.values():
        t["total"] = sum(t[s] for s in STAGES)
    device = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor() or "cpu"
    print(f"Sapiens post-processing per photo, {photo_hw[0]}x{photo_hw[1]} maps, {args.people} person(s), "
          f"foreground {args.foreground}, device {args.device} ({device}), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, median of {args.repeats}")
    print("| path | " + " | ".join(STAGES) + " | total s/photo |")
    print("|---" * (len(STAGES) + 2) + "|")
    for name, t in table.items():
        print(f"| {name} | " + " | ".join(f"{t[s]:.4f}" for s in STAGES) + f" | {t['total']:.4f} |")
    print("| before / now | " + " | ".join(f"{table['before'][s] / table['now'][s]:.1f}x" for s in STAGES)
          + f" | {table['before']['total'] / table['now']['total']:.1f}x |")
    print(f"keypoints of the two paths agree within {agree:.1e} heatmap px")
    if args.json:
        Path(args.json).write_text(json.dumps({"photo": photo_hw, "people": args.people, "device": args.device,
                                               "device_name": device, "foreground": args.foreground,
                                               "seconds": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
