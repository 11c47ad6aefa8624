# SPDX-License-Identifier: GPL-3.0-or-later
"""Building one fitted body in bpy, per stage, and writing its skin weights vectorised vs naive.

The body is the fit's own body model (anny, 13,718 vertices, 104 bones, up to 9 weights per
vertex) posed and dressed as in tests/support/body_scenes.py ("dressed", 480x360 maps). Stages:
clothing thickness and texture bake (numpy), then mesh, armature, weights, pose (bpy). Weights:
ours (one float attribute per bone, foreach_set, converted to a vertex group in C: exact) vs
one ``VertexGroup.add`` per vertex and bone, the common way, on the same data.

    .venv/bin/python benchmarks/bench_body.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "support")]

import bpy  # noqa: E402

import body_scenes  # noqa: E402
from sapiens_blender.blender import body  # noqa: E402
from sapiens_blender.core.body import dressing as body_dressing, surface as body_surface, texture as body_texture  # noqa: E402


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def naive_weights(obj, names, weight_bones, weight_values) -> None:
    groups = [obj.vertex_groups.new(name=n) for n in names]
    for v in range(len(weight_bones)):  # the per-vertex loop the product avoids
        for b, w in zip(weight_bones[v], weight_values[v]):
            if w > 0:
                groups[b].add([v], float(w), "REPLACE")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    scene = body_scenes.make("dressed", size=(480, 360))
    t, f, maps = scene.template, scene.fit, scene.maps
    posed = f.vertices[0].astype(np.float64)
    rest = f.rest_vertices[0]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    coll = bpy.context.scene.collection
    rows = []
    landmarks = body_dressing.head_landmarks(t, f, 0)
    s, worn = timed(lambda: body_dressing.dressing(maps, 1, posed, t.faces, t.vertex_parts, rest_vertices=rest,
                                                  **landmarks), args.repeats)
    rows.append(("clothing thickness (numpy)", s))
    per_face = body_surface.face_parts(t.faces, t.vertex_parts)  # the build's fills, one per part
    s, _ = timed(lambda: body_texture.bake_texture(maps, 1, posed, t.faces, t.uv, t.face_uv, per_face,
                                                   dressed=worn.dressed, part_names=t.part_names,
                                                   rest_vertices=rest), args.repeats)
    rows.append(("texture bake 1024² (numpy)", s))
    carry = body_texture.carry_colours
    body_texture.carry_colours = lambda *a, **k: a[5]  # the baseline: each part's median, not carried round
    try:
        s, _ = timed(lambda: body_texture.bake_texture(maps, 1, posed, t.faces, t.uv, t.face_uv, per_face,
                                                       dressed=worn.dressed), args.repeats)
    finally:
        body_texture.carry_colours = carry
    rows.append(("texture bake, each part one median (before)", s))
    s, obj = timed(lambda: body.build_body_mesh(rest, t.faces, t.uv, t.face_uv, "bench", coll), args.repeats)
    rows.append(("mesh + UVs (bpy)", s))
    s, arm = timed(lambda: body.build_body_armature(t.bone_names, t.bone_parents, f.rest_bone_matrices[0],
                                                    f.rest_bone_tails[0], "bench arm", coll), args.repeats)
    rows.append(("armature, 104 bones (bpy)", s))

    body.skin_to_armature(obj, arm)
    body.write_bone_weights(obj, list(t.bone_names), t.weight_bones, t.weight_values)
    s, _ = timed(lambda: body.pose_armature(arm, f.rest_bone_matrices[0], f.bone_matrices[0], t.bone_parents),
                 args.repeats)
    rows.append(("photo pose, quaternions in bulk (bpy)", s))

    def ours():
        bpy.ops.wm.read_factory_settings(use_empty=True)  # each candidate in a fresh scene
        target = body.build_body_mesh(rest, t.faces, t.uv, t.face_uv, "w", bpy.context.scene.collection)
        start = time.perf_counter()
        body.write_bone_weights(target, list(t.bone_names), t.weight_bones, t.weight_values)
        return time.perf_counter() - start, target

    def naive():
        bpy.ops.wm.read_factory_settings(use_empty=True)
        target = body.build_body_mesh(rest, t.faces, t.uv, t.face_uv, "w", bpy.context.scene.collection)
        start = time.perf_counter()
        naive_weights(target, list(t.bone_names), t.weight_bones, t.weight_values)
        return time.perf_counter() - start, target

    ours_s = statistics.median([ours()[0] for _ in range(args.repeats)])
    naive_s = statistics.median([naive()[0] for _ in range(args.repeats)])
    for name, seconds in rows:
        print(f"{name:42s} {seconds:7.3f} s")
    print(f"{'weights: attribute + convert (ours)':42s} {ours_s:7.3f} s")
    print(f"{'weights: VertexGroup.add per vertex (naive)':42s} {naive_s:7.3f} s   ratio {naive_s / ours_s:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
