# SPDX-License-Identifier: GPL-3.0-or-later
"""The expression fit on real photos: each photo of a folder built by the real CLI, a table of
the driven ARKit keys per face, and (``--renders DIR``) each fitted face rendered close up,
neutral | fitted, untextured (the renders hold no pixel of the photo).

    .venv/bin/python benchmarks/bench_real_faces.py PHOTO_DIR [--work DIR] [--renders DIR] [--model mediapipe]
    .venv/bin/python benchmarks/bench_real_faces.py --maps A.npz B.npz ...   # saved builds, no server

For each photo, this checkout's ``sapiens-blender build PHOTO --body minimal -o WORK/NAME.blend --save-maps
WORK/NAME.npz --report WORK/NAME.json`` (a local server per photo: ~10-15 s on CPU with the
offline backend). The values are the report's ``expression_values`` (keys above 0.05); with
``--maps`` they are fitted again by this checkout's code from the saved keypoints and bodies
(the maps' own template: its landmark vertices are those of the server that built it).
There is no ground truth for a real photo: the table is read beside the photo and the renders
(docs/expressions.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

COLUMNS = (("jawOpen", "jaw"), ("mouthSmileLeft", "smL"), ("mouthSmileRight", "smR"),
           ("mouthFrownLeft", "frL"), ("mouthFrownRight", "frR"), ("mouthPucker", "pck"),
           ("mouthStretchLeft", "stL"), ("mouthStretchRight", "stR"), ("browInnerUp", "bIn"),
           ("browDownLeft", "bDL"), ("browDownRight", "bDR"), ("browOuterUpLeft", "bOL"),
           ("browOuterUpRight", "bOR"), ("eyeBlinkLeft", "blL"), ("eyeBlinkRight", "blR"),
           ("eyeWideLeft", "wdL"), ("eyeWideRight", "wdR"), ("jawLeft", "jL"), ("jawRight", "jR"))
PHOTOS = (".jpg", ".jpeg", ".png")
RENDER_PX = 256


def build(photo: Path, work: Path, model: str | None) -> tuple[Path, Path, Path]:
    stem = work / photo.stem
    # this checkout's CLI (and the local server it starts), whatever the environment has installed
    cmd = [sys.executable, "-c", "from sapiens_blender.cli import main; main()", "build", str(photo),
           "--body", "minimal", "-o", f"{stem}.blend", "--save-maps", f"{stem}.npz", "--report", f"{stem}.json"]
    if model:
        cmd += ["--model", model]
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{photo.name}: build failed: {run.stdout[-400:]}{run.stderr[-400:]}")
    print(f"built {photo.name} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return Path(f"{stem}.blend"), Path(f"{stem}.npz"), Path(f"{stem}.json")


def face_rows(maps_path: Path, report_path: Path | None) -> list[dict]:
    """One row per built person: name, face height in pixels, the keys (report's or refitted)."""
    from sapiens_blender.core.body import expression_fit as ef
    from sapiens_blender.core.body.records import body_from_maps
    from sapiens_blender.core.maps.canonical import Maps

    maps = Maps.load(maps_path)
    template, fit = body_from_maps(maps)
    reported = {}
    if report_path is not None:
        for person in json.loads(report_path.read_text())["people"]:
            body = person.get("body") or {}
            seen = not str(body.get("expression_source", "")).startswith("neutral")
            reported[person.get("person_id", len(reported) + 1)] = body.get("expression_values") if seen else None
    rows = []
    for i, pid in enumerate(fit.person_ids):
        kp = maps.person_keypoints(int(pid))
        rig = ef.face_rig(template, fit.rest_vertices[i], fit.rest_bone_matrices[i], fit.bone_matrices[i],
                          fit.placement[i], maps.intrinsics)
        names = list(template.face_landmark_names)
        rows_kp = [ef.KEYPOINT_INDEX[n] for n in names]
        seen = kp[rows_kp, 2] >= ef.MIN_SCORE
        at = names.index
        ends = [at("center_of_nose_root"), at("tip_of_chin")]
        height = float(np.linalg.norm(kp[rows_kp[ends[0]], :2] - kp[rows_kp[ends[1]], :2])) if seen[ends].all() else 0.0
        if report_path is not None and int(pid) in reported:
            values = reported[int(pid)]
        else:
            e = ef.fit_expression(rig, kp, len(template.expression_names)) if rig is not None else None
            values = None if e is None else {n: float(v) for n, v in zip(template.expression_names, e) if v > 0.05}
        rows.append({"face": f"{maps_path.stem}#{int(pid)}", "face_px": height, "values": values,
                     "person": int(pid)})
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"| face | face px | " + " | ".join(short for _, short in COLUMNS) + " |")
    print("|---|---:|" + "---:|" * len(COLUMNS))
    for r in rows:
        if r["values"] is None:
            print(f"| {r['face']} | {r['face_px']:.0f} | face not seen |")
            continue
        cells = [f"{r['values'].get(k, 0.0):.2f}".replace("0.00", "0") for k, _ in COLUMNS]
        print(f"| {r['face']} | {r['face_px']:.0f} | " + " | ".join(cells) + " |")


def render_faces(blend: Path, maps_path: Path, out_dir: Path) -> list[Path]:
    """neutral | fitted close-up of every fitted face of a built .blend (Workbench, one colour)."""
    import bpy
    from mathutils import Vector
    from PIL import Image

    from sapiens_blender.core.body.records import body_from_maps
    from sapiens_blender.core.maps.canonical import Maps

    template, _fit = body_from_maps(Maps.load(maps_path))
    names = list(template.face_landmark_names)
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    scene = bpy.context.scene
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x = scene.render.resolution_y = RENDER_PX
    scene.render.resolution_percentage = 100
    shading = scene.display.shading
    shading.light, shading.color_type = "STUDIO", "SINGLE"
    shading.single_color = (0.8, 0.62, 0.52)
    shading.show_cavity = True
    cam_data = bpy.data.cameras.new("face close-up")
    cam_data.lens = 85.0
    cam = bpy.data.objects.new("face close-up", cam_data)
    scene.collection.objects.link(cam)
    scene.camera = cam
    for ob in bpy.data.objects:  # only the bodies
        if ob.type == "MESH" and not ob.data.shape_keys:
            ob.hide_render = True
    out = []
    bodies = sorted((o for o in bpy.data.objects if o.type == "MESH" and o.data.shape_keys), key=lambda o: o.name)
    for k, obj in enumerate(bodies):
        keys = obj.data.shape_keys.key_blocks
        fitted = {kb.name: kb.value for kb in keys[1:]}
        for other in bodies:
            other.hide_render = other is not obj

        def at(name):
            dg = bpy.context.evaluated_depsgraph_get()
            ev = obj.evaluated_get(dg)
            return ev.matrix_world @ ev.data.vertices[int(template.face_landmark_vertices[names.index(name)])].co

        for kb in keys[1:]:
            kb.value = 0.0
        nasion, chin = at("center_of_nose_root"), at("tip_of_chin")
        left, right = at("l_outer_end_of_upper_lash_line"), at("r_outer_end_of_upper_lash_line")
        centre = (nasion + chin) / 2
        up = (nasion - chin).normalized()
        front = (left - right).cross(up).normalized()
        if front.dot(at("tip_of_nose") - centre) < 0:
            front = -front
        cam.location = centre + front * 0.5
        cam.rotation_euler = (-front).to_track_quat("-Z", "Y").to_euler()
        halves = []
        for tag, values in (("neutral", {}), ("fitted", fitted)):
            for kb in keys[1:]:
                kb.value = values.get(kb.name, 0.0)
            path = out_dir / f".{blend.stem}_{k}_{tag}.png"
            scene.render.filepath = str(path)
            bpy.ops.render.render(write_still=True)
            halves.append(Image.open(path).convert("RGB"))
            path.unlink()
        pair = Image.new("RGB", (2 * RENDER_PX, RENDER_PX))
        pair.paste(halves[0], (0, 0))
        pair.paste(halves[1], (RENDER_PX, 0))
        dest = out_dir / f"face_{blend.stem}_{k + 1}.png"
        pair.quantize(colors=128).save(dest, optimize=True)
        out.append(dest)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("photos", nargs="?", type=Path, help="a folder of photos (.jpg, .jpeg, .png)")
    ap.add_argument("--maps", nargs="+", type=Path, help="saved builds (--save-maps) instead of photos")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_real_faces"))
    ap.add_argument("--renders", type=Path, help="write close-up renders (neutral | fitted) here")
    ap.add_argument("--model", default=None, help="the build's --model (default: the CLI's)")
    args = ap.parse_args()
    rows, built = [], []
    if args.maps:
        for m in args.maps:
            rows += face_rows(m, None)
    elif args.photos:
        args.work.mkdir(parents=True, exist_ok=True)
        for photo in sorted(p for p in args.photos.iterdir() if p.suffix.lower() in PHOTOS):
            try:
                blend, maps, report = build(photo, args.work, args.model)
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                continue
            rows += face_rows(maps, report)
            built.append((blend, maps))
    else:
        ap.error("give a folder of photos or --maps")
    print_table(rows)
    if args.renders and built:
        args.renders.mkdir(parents=True, exist_ok=True)
        for blend, maps in built:
            for path in render_faces(blend, maps, args.renders):
                print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
