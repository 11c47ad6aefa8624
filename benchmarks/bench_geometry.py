# SPDX-License-Identifier: GPL-3.0-or-later
"""Geometry core at full resolution (numpy, no bpy): vectorised vs a naive per-pixel version.

The input is an analytic sphere filling most of a 1024x768 frame (~250k vertices). Each stage
of the core is timed (best of ``--repeats``, CPU time, so other processes' load matters less);
the surface mesh is also built the naive way (Python loops over pixels and quads, the way a
first version would) on the same data, and the ratio is printed.

    .venv/bin/python benchmarks/bench_geometry.py [--repeats 3] [--size 1024x768]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

from geometry_fixtures import sphere_maps  # noqa: E402

from sapiens_blender.core.geometry import closed, normals, surface  # noqa: E402


def naive_surface(maps, person_id=1, max_jump=surface.DEFAULT_MAX_JUMP):
    """Per-pixel loops: a vertex per valid pixel, two triangles per complete quad."""
    k = maps.intrinsics
    f = 0.5 * (k[0, 0] + k[1, 1])
    index, verts = {}, []
    for r in range(maps.height):
        for c in range(maps.width):
            z = float(maps.depth[r, c])
            if maps.mask[r, c] == person_id and z == z:
                index[(r, c)] = len(verts)
                verts.append(((c + 0.5 - k[0, 2]) * z / k[0, 0], (r + 0.5 - k[1, 2]) * z / k[1, 1], z))
    faces = []
    for (r, c), a in index.items():
        b, cc, d = index.get((r, c + 1)), index.get((r + 1, c)), index.get((r + 1, c + 1))
        for tri in ((a, cc, d), (a, d, b)):
            if None in tri:
                continue
            zs = [verts[i][2] for i in tri]
            if max(zs) - min(zs) <= max_jump * min(zs) * 1.4142 / f:
                faces.append(tri)
    return np.asarray(verts, np.float32), np.asarray(faces, np.int32)


def best_cpu(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return best, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", default="1024x768", help="WIDTHxHEIGHT")
    args = ap.parse_args(argv)
    w, h = (int(x) for x in args.size.lower().split("x"))
    maps = sphere_maps(h=h, w=w, radius=0.9, centre=(0.0, 0.0, 3.0), f=0.9 * w)
    t_mesh, mesh = best_cpu(lambda: surface.build_surface_mesh(maps, 1), args.repeats)
    t_naive, (nv, nf) = best_cpu(lambda: naive_surface(maps), 1)
    t_obj, _ = best_cpu(lambda: normals.encode_normal_texture(normals.object_space_normal_map(maps, 1)), args.repeats)
    t_tan, _ = best_cpu(lambda: normals.tangent_space_normal_map(mesh, maps), args.repeats)
    t_closed, _ = best_cpu(lambda: closed.close_body(mesh, maps), 1)
    print(f"{w}x{h}: {len(mesh.vertices)} vertices, {len(mesh.faces)} faces (naive: {len(nv)}, {len(nf)})")
    print(f"surface mesh + UVs + parts   {t_mesh:7.3f} s   naive loops {t_naive:7.3f} s   x{t_naive / t_mesh:.0f}")
    print(f"object-space normal texture  {t_obj:7.3f} s")
    print(f"tangent-space normal texture {t_tan:7.3f} s")
    print(f"closed body                  {t_closed:7.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
