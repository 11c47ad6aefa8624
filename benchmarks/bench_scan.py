# SPDX-License-Identifier: GPL-3.0-or-later
"""The 360° scan (issue 34): speed end to end and quality from new viewpoints, against the
single-view build of the same run.

Ground truth (tests/support/scan_scenes.py): a dressed anny body whose colours differ front,
sides and back, turning once in N views (keypoints 1.5 px and depth 5 mm of noise, the arms a
few degrees off per view, a light on the camera, an exposure per view); ``--camera orbit``: the
person stands still and a hand-held camera goes round (its height, distance and aim differ
per view), scored the same way.

- **speed**: `sapiens-blender scan --maps-dir DIR -o scan.glb` (CLI subprocess, a running server
  with the body model loaded) against `build --maps view00.npz --body -o single.glb`, wall clock;
- **quality** (``--quality``): the scan's body and texture (the same client calls and numpy
  steps as the CLI, without Blender) against one view's, scored from viewpoints between and
  above the input views (tests/support/scan_scoring.py): silhouette IoU, colour error after one
  gain per channel, whole-body Chamfer, hidden side of the first view, rest height, watertight.

    .venv/bin/python benchmarks/bench_scan.py [--views 24] [--size 960 720] [--camera turn|orbit] [--quality]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "support")]

import scan_scenes  # noqa: E402
from server_harness import start_server  # noqa: E402

CLI = "import sys; from sapiens_blender.cli import main; sys.exit(main())"


def cli(*args) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CLI, *map(str, args)], cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"{args[0]} failed: {out.stderr[-2000:]}")
    return seconds, out


def render_grid(case, builds, path: Path) -> None:
    """A PNG: a row per body (the truth, then each build), a column per new viewpoint."""
    import scan_scoring
    from PIL import Image

    truth = case.bodies[0]
    centre = 0.5 * (truth.vertices.min(0) + truth.vertices.max(0))
    k = scan_scoring._intrinsics()
    rows = []
    for name, posed, faces, uv, face_uv, tex in [("truth", None, None, None, None, None)] + builds:
        tiles = []
        for az, el in ((0.0, 0.0), (90.0, 0.0), (180.0, 0.0), (270.0, 0.0), (135.0, 30.0)):
            move = scan_scoring.camera(az, el, centre)
            if posed is None:
                mask, col = scan_scoring.render_truth(move(truth.vertices), truth.faces, case.colours, k)
            else:
                mask, col = scan_scoring.render_textured(move(posed), faces, uv, face_uv, tex, k)
            tiles.append(np.where(mask[..., None], col, 255.0).clip(0, 255).astype(np.uint8))
        rows.append(np.concatenate(tiles, 1))
    Image.fromarray(np.concatenate(rows, 0)).save(path)


def quality(case, client, tex_size: int, renders: Path | None = None) -> list[dict]:
    """Rows for the scan and for view 0 alone."""
    import scan_scoring
    import scoring
    import trimesh

    from sapiens_blender.core.body import dressing as bd, surface as bs, texture as bt
    from sapiens_blender.core.body.records import BodyFit
    from sapiens_blender.core.body.scan import ScanView, fit_quality, scan_surface
    from sapiens_blender.core.remote.body_calls import template_for
    from sapiens_blender.core.remote.analysis import fit_body
    from sapiens_blender.core.remote.scan_calls import scan_body

    template, fit, fitted, _notes, _rep = scan_body(client, case.views, [1] * len(case.views))
    q = fit_quality([fit.report(p).get("surface_residual_m") for p in fit.person_ids])
    views = [ScanView(case.views[k], 1, fit.vertices[j], float(q[j])) for j, k in enumerate(fitted)]
    surf = scan_surface(template, fit, views, texture_size=tex_size)
    arrays = fit_body(client, case.views[0])
    one = BodyFit.from_arrays(arrays, template=template_for(client, arrays))
    worn = bd.dressing(case.views[0], 1, one.vertices[0], template.faces, template.vertex_parts,
                       rest_vertices=one.rest_vertices[0], **bd.head_landmarks(template, one, 0))
    posed1 = bd.dress(one.vertices[0], template.faces, worn.thickness, worn.over)
    tex1, _ = bt.bake_texture(case.views[0], 1, posed1, template.faces, template.uv, template.face_uv,
                              bs.face_parts(template.faces, template.vertex_parts), size=tex_size, dressed=worn.dressed)
    truth = case.bodies[0]
    if renders is not None:
        f, uv, fuv = template.faces, template.uv, template.face_uv
        render_grid(case, [("scan", surf.posed, f, uv, fuv, surf.texture), ("one photo", posed1, f, uv, fuv, tex1)],
                    renders)
    rows = []
    for name, posed, tex, rest in (("scan", surf.posed, surf.texture, fit.rest_vertices[0]),
                                   ("one photo", posed1, tex1, one.rest_vertices[0])):
        views_scored = scan_scoring.score_views(truth.vertices, truth.faces, case.colours, posed, template.faces,
                                                template.uv, template.face_uv, tex)
        body = scoring.score_body(posed, template.faces, truth)
        rows.append({
            "build": name,
            "colour_mean": np.mean([s["colour"] for s in views_scored.values()]),
            "colour_back": views_scored[scan_scoring.BACK]["colour"],
            "iou_mean": np.mean([s["iou"] for s in views_scored.values()]),
            "chamfer_pct": body["chamfer_pct"], "hidden_cm": 100 * body["hidden_mean"],
            "height_err_cm": 100 * ((rest[:, 2].max() - rest[:, 2].min()) - case.height),
            "watertight": trimesh.Trimesh(posed, template.faces, process=False).is_watertight,
            "unseen_texels_pct": 100 * surf.report["texture"]["unseen_share"] if name == "scan" else None})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--views", type=int, default=24)
    ap.add_argument("--size", type=int, nargs=2, default=(960, 720), metavar=("H", "W"))
    ap.add_argument("--camera", choices=("turn", "orbit"), default="turn",
                    help="the person turns before a fixed camera (default) or a camera goes round them")
    ap.add_argument("--quality", action="store_true", help="also score against the ground truth")
    ap.add_argument("--texture-size", type=int, default=1024)
    ap.add_argument("--renders", type=Path, metavar="PNG",
                    help="with --quality: the truth, the scan and one photo's body from 5 new viewpoints")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_scan_"))
    t = time.perf_counter()
    case = scan_scenes.make(views=args.views, size=tuple(args.size), camera=args.camera)
    folder = tmp / "views"
    folder.mkdir()
    for i, maps in enumerate(case.views):
        maps.save(folder / f"view{i:02d}.npz")
    print(f"ground truth ({args.camera}): {args.views} views of {args.size[1]}x{args.size[0]} in {time.perf_counter() - t:.1f} s "
          f"(not timed below)")
    server = start_server(tmp, timeout=120)
    try:
        from sapiens_blender.core.remote.analysis import body_template
        from sapiens_blender.core.remote.client import V2Client

        url = f"http://{server.url}"
        with V2Client(url, server.token) as client:
            body_template(client)  # the body model loaded: a running server's state
        common = ["--server", url, "--token", server.token]
        single_s, _ = cli("build", "--maps", folder / "view00.npz", "--body", "-o", tmp / "single.glb", *common)
        scan_s, out = cli("scan", "--maps-dir", folder, "-o", tmp / "scan.glb", "--texture-size",
                          str(args.texture_size), *common)
        stages = [line for line in out.stdout.splitlines() if "scan fit" in line or line.startswith("seconds")]
        print(f"| build | views | seconds (maps -> .glb, CLI, server warm) |\n|---|---|---|\n"
              f"| one photo (`build --body`) | 1 | {single_s:.1f} |\n| scan | {args.views} | {scan_s:.1f} |")
        print("scan stages: " + " / ".join(s.strip() for s in stages))
        if args.quality:
            with V2Client(url, server.token) as client:
                rows = quality(case, client, args.texture_size, args.renders)
            keys = list(rows[0])
            print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
            for r in rows:
                print("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r.values()) + " |")
            print(json.dumps({"targets": {"colour_mean": "<= 15", "colour_back": "<= 15", "iou_mean": ">= 0.95",
                                          "chamfer_pct": "<= 0.2", "hidden_cm": "<= 0.4", "height_err_cm": "|x| <= 1"}}))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
