# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit again on bench_real.py's saved maps, in this process, with other settings.

bench_real.py builds each photo through the CLI and keeps its maps (``--out DIR``, one ``.npz``
per photo). The analysis is the slow and settled part; the fit is what changes. This script fits
every person of those maps again (the server's own observation and fit code, one thread) with
FitSettings' defaults or with weights given on the command line, and scores the bodies exactly as
bench_real.py does (its scoring functions): the 3D frames' PA-MPJPE beside the fit's input
(the maps' keypoints_3d), the 2D photos' recall and error beside the backend's keypoints.

    PYTHONPATH=. .venv/bin/python benchmarks/refit_real.py --data /work/realdata --out /tmp/br \
        [--weights '{"world": 2}'] [--sets coco,mpi_inf_3dhp] [--json-out F]

It reads only photos bench_real.py reads (the reserved sets never). Its numbers are the fit's
alone: bench_real.py's run through the CLI stays the product's figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_real import (_LOADERS_3D, SCORED_NAMES, body_shapes, built_name, data_root,  # noqa: E402
                        legs_over_45, load_2d_sets, project, read_outputs, score_2d, score_3d)

MAPS_KEYS = ("image", "mask", "parts", "part_names", "intrinsics", "keypoints", "keypoints_3d", "depth", "metric")


def refit(photo, out: Path, body, settings) -> dict | None:
    """bench_real's ``out`` dict for ``photo`` with the bodies fitted here; None without maps."""
    from inference_server.fit.correspondences import JOINT_NAMES
    from inference_server.fit.observations import ObservationError, observe
    from inference_server.fit.solver import fit_people

    path = out / f"{built_name(photo)}.npz"  # people of one photo share its build
    if not path.is_file():
        return None
    files = {"maps": path, "joints": out / f"{photo.key}.none.json"}  # no joints file: backend only
    scored = read_outputs(photo, {"files": files})
    if path in _FITTED:  # another labelled person of the same photo
        scored["bodies"] = _FITTED[path]
        return scored
    with np.load(path) as z:
        m = {k: z[k] for k in MAPS_KEYS if k in z.files}
    k = np.asarray(m["intrinsics"], np.float64)
    hm, wm = m["image"].shape[:2]
    scale = np.array([photo.hw[1] / wm, photo.hw[0] / hm])
    observations = []
    for pid in range(1, len(m["keypoints"]) + 1):
        try:
            observations.append(observe(pid, mask=m["mask"], parts=m["parts"], part_names_in=m["part_names"],
                                        intrinsics=k, keypoints=m["keypoints"], depth=m.get("depth"),
                                        pointmap=None, metric=bool(m.get("metric", True)),
                                        keypoints_3d=m.get("keypoints_3d")))
        except ObservationError:
            pass
    if observations:
        res = fit_people(body, observations, settings)
        for pid, joints, est, ph in zip(res["person_ids"], res["joints"], res["joints_estimated"], res["phenotypes"]):
            j = {n: np.asarray(joints[i], np.float64) for i, n in enumerate(JOINT_NAMES) if n in SCORED_NAMES}
            names = list(j)
            uv = project(np.array([j[n] for n in names]), k) * scale
            scored["bodies"].append({"id": int(pid), "joints": j, "points": dict(zip(names, map(tuple, uv))),
                                     "phenotypes": [float(x) for x in ph],
                                     "estimated": sorted(n for i, n in enumerate(JOINT_NAMES)
                                                         if n in SCORED_NAMES and est[i])})
    _FITTED[path] = scored["bodies"]
    return scored


_FITTED: dict = {}


def summarize(rows: list[dict]) -> dict:
    three = [r for r in rows if "fit_pa_mm" in r["score"] or "input_pa_mm" in r["score"]]
    two = [r for r in rows if "labelled" in r["score"] and r["dataset"] != "humanart-art"]
    s = {"3d": {r["key"].split("__")[-1]: (r["score"].get("fit_pa_mm"), r["score"].get("input_pa_mm"),
                                           r["score"].get("fit_2d_pct")) for r in three}}
    fits = [v[0] for v in s["3d"].values() if v[0] is not None]
    s["fit_pa_mean"] = round(float(np.mean(fits)), 1) if fits else None
    errs = lambda src: [m["err_pct"] for r in two for m in r["score"][f"{src}_matches"]]  # noqa: E731
    s["2d"] = {"labelled": sum(r["score"]["labelled"] for r in two),
               "bodies_recalled": sum(r["score"]["bodies_recalled"] for r in two),
               "backend_recalled": sum(r["score"]["backend_recalled"] for r in two),
               "bodies_err_pct": round(float(np.mean(errs("bodies"))), 2) if errs("bodies") else None,
               "backend_err_pct": round(float(np.mean(errs("backend"))), 2) if errs("backend") else None,
               "bodies_unmatched": sum(len(r["score"]["bodies_unmatched"]) for r in two)}
    legs = [leg for r in two for leg in r["score"]["legs_out_of_frame"] if leg.get("standing")]
    s["2d"]["standing_legs"] = len(legs)
    s["2d"]["standing_legs_over_45"] = legs_over_45(legs)
    # the bodies' error on the people both recall: the fit's own loss of 2D, person for person
    pairs = []
    for r in two:
        back = {m["label"]: m["err_pct"] for m in r["score"]["backend_matches"]}
        pairs += [(m["err_pct"], back[m["label"]]) for m in r["score"]["bodies_matches"] if m["label"] in back]
    if pairs:
        a = np.array(pairs)
        s["2d"]["both_recalled"] = len(a)
        s["2d"]["bodies_minus_backend_pct"] = round(float((a[:, 0] - a[:, 1]).mean()), 2)
    shapes = body_shapes(rows)  # bench_real's own count of the fitted builds
    if shapes:
        s["shape"] = shapes
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path, help="bench_real.py's --out (its .npz maps)")
    ap.add_argument("--sets", default="")
    ap.add_argument("--weights", default="{}", help="JSON: FitSettings.weights overrides")
    ap.add_argument("--settings", default="{}", help="JSON: other FitSettings fields")
    ap.add_argument("--observe", default="{}", help="JSON: observations.py constants to try (e.g. WORLD_FLOOR)")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)

    import torch

    from inference_server.fit.body_model import BodyModel
    from inference_server.fit.solver import FitSettings

    from inference_server.fit import observations

    for name, value in json.loads(args.observe).items():
        if not hasattr(observations, name):
            ap.error(f"--observe: observations.py has no {name}")
        setattr(observations, name, value)
    torch.set_grad_enabled(True)
    root = data_root(args.data)
    photos = [p for load in _LOADERS_3D.values() for p in load(root)] + load_2d_sets(root)
    if args.sets:
        wanted = set(args.sets.split(","))
        photos = [p for p in photos if p.dataset in wanted or p.dataset.split("-")[0] in wanted]
    settings = FitSettings(**json.loads(args.settings))
    settings.weights = {**settings.weights, **json.loads(args.weights)}
    body = BodyModel.load("cpu")
    rows, t0 = [], time.perf_counter()
    for photo in photos:
        scored = refit(photo, args.out, body, settings)
        if scored is None:
            print(f"  {photo.key}: no maps in {args.out}", flush=True)
            continue
        score = score_3d(photo, scored, None) if photo.truth3d is not None else score_2d(photo, scored)
        rows.append({"key": photo.key, "dataset": photo.dataset, "score": score, "build_name": built_name(photo),
                     "bodies_phenotypes": {b["id"]: b["phenotypes"] for b in scored["bodies"] if b.get("phenotypes")}})
        if photo.truth3d is not None:
            print(f"  {photo.key}: fit {score.get('fit_pa_mm')} mm (input {score.get('input_pa_mm')}), "
                  f"2D {score.get('fit_2d_pct')} %", flush=True)
        else:
            print(f"  {photo.key}: bodies {score['bodies_matches']} backend {score['backend_matches']}", flush=True)
    summary = {"weights": settings.weights, "observe": json.loads(args.observe), "seconds": round(time.perf_counter() - t0, 1), **summarize(rows)}
    print(json.dumps(summary, indent=1))
    if args.json_out:
        args.json_out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
