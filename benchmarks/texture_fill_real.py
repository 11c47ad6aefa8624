# SPDX-License-Identifier: GPL-3.0-or-later
"""How well a fitted body's texture guesses what the camera did not see, on real photos.

The hidden back of a body has no photo to score against, so this holds out what the photo does
show and guesses it as the hidden side is guessed (``texture.carry_colours``):

- **centre**: of every body part, the vertices the camera sees most squarely (facing cosine over
  ``--centre``, the middle of the part as seen) are hidden; the rest of the part (its sides as
  seen) are all the fill may use (parts whose sides alone are seen too little for a colour of
  their own are left out: the next two tests are theirs). Like the back of a torso, the held-out middle lies between the
  seen sides. Guessed by the part's median seen colour (the fill before carrying) and by the
  colours carried round the part.
- **one side hidden**: each side part (a leg, an arm, a foot) both of whose sides are seen is
  hidden whole and guessed from its mirror image on the other side;
- **both sides hidden**: each such pair hidden together (both shins) and guessed from the parts
  round them; both against the neutral skin fill such parts took before.

The error is the mean absolute difference from the photo's own colour, in 8-bit levels (0-255),
averaged over the held-out vertices of each body, then over the bodies.

    PYTHONPATH=. .venv/bin/python benchmarks/texture_fill_real.py --maps /tmp/br  # bench_real.py --out

It reads bench_real.py's saved maps (their bodies fitted by the CLI); nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def body_scores(maps, template, fit, person_id: int, centre: float) -> dict | None:
    from sapiens_blender.core.body import surface as bs, texture as bt

    i = fit.index(person_id)
    v = np.asarray(fit.vertices[i], np.float64)
    rest = np.asarray(fit.rest_vertices[i], np.float64)
    f = np.asarray(template.faces, np.int64)
    vertex_part = bt.vertex_parts_of(f, bs.face_parts(f, template.vertex_parts), len(v))
    zbuf = bs.depth_buffer(v, f, maps.intrinsics, maps.width, maps.height)
    observed = bs.observed_points(maps) if maps.metric else None
    normals, edges = bs.vertex_normals(v, f), bs.mesh_edges(f)
    seed, worn, colour = bt.photo_colours(maps, person_id, v, f, normals, vertex_part, zbuf, observed, template.part_names)
    if seed.sum() < 200:
        return None
    facing = np.einsum("ij,ij->i", normals, -v / np.linalg.norm(v, axis=1, keepdims=True))
    out = {}
    held = seed & (facing > centre)
    kept = seed & ~held
    per_part = np.bincount(vertex_part, minlength=len(template.part_names))
    sides_seen = np.bincount(vertex_part[kept], minlength=len(per_part)) >= bt.MIN_SEEN_FOR_FILL * np.maximum(per_part, 1)
    held &= sides_seen[vertex_part]  # parts whose sides alone are seen enough for a colour of their own
    median = _part_medians(colour, kept, vertex_part)
    carried = bt.carry_colours(kept, worn, colour, vertex_part, edges, np.concatenate([median, median], 1), False)[:, :3]
    if held.sum() >= 50:
        out["centre_median"] = _err(median[held], colour[held])
        out["centre_carried"] = _err(carried[held], colour[held])
        out["centre_n"] = int(held.sum())
        out["centre_parts"] = {template.part_names[p]: (np.abs(median[held & (vertex_part == p)] - colour[held & (vertex_part == p)]).mean(1).sum(),
                                                        np.abs(carried[held & (vertex_part == p)] - colour[held & (vertex_part == p)]).mean(1).sum(),
                                                        int((held & (vertex_part == p)).sum()))
                               for p in np.unique(vertex_part[held])}
    partners = bt.side_partners(template.part_names)
    seeded = np.bincount(vertex_part[seed], minlength=len(per_part))
    enough = seeded >= bt.MIN_SEEN_FOR_FILL * np.maximum(per_part, 1)
    skin_fill = np.tile(bt.SKIN_FILL.astype(np.float64), (len(v), 2))
    for test, pairs in (("mirror", [(p,) for p in partners]), ("pair", {tuple(sorted(x)) for x in partners.items()})):
        guessed, skin, n = 0.0, 0.0, 0
        for hide in pairs:
            if not enough[list(hide)].all():
                continue
            hidden = seed & np.isin(vertex_part, hide)
            guess = bt.carry_colours(seed & ~np.isin(vertex_part, hide), worn, colour, vertex_part, edges, skin_fill,
                                     False, template.part_names, rest)[:, :3]
            if test == "mirror" and not enough[partners[hide[0]]]:
                continue
            guessed += _err(guess[hidden], colour[hidden]) * hidden.sum()
            skin += _err(skin_fill[hidden, :3], colour[hidden]) * hidden.sum()
            n += int(hidden.sum())
        if n:
            out[f"{test}_carried"], out[f"{test}_skin"], out[f"{test}_n"] = guessed / n, skin / n, n
    return out


def _part_medians(colour, kept, vertex_part) -> np.ndarray:
    """The fill before carrying, per vertex: its part's median kept colour (skin if too few)."""
    from sapiens_blender.core.body import texture as bt

    out = np.tile(bt.SKIN_FILL.astype(np.float64), (len(colour), 1))
    per_part = np.bincount(vertex_part)
    for part in np.unique(vertex_part[kept]):
        of_part = kept & (vertex_part == part)
        if of_part.sum() >= bt.MIN_SEEN_FOR_FILL * per_part[part]:  # as carry_colours decides
            out[vertex_part == part] = np.median(colour[of_part], axis=0)
    return out


def _err(guess: np.ndarray, truth: np.ndarray) -> float:
    return float(np.abs(guess - truth).mean())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maps", required=True, help="bench_real.py's --out folder (maps with fitted bodies)")
    ap.add_argument("--centre", type=float, default=0.8, help="facing cosine over which a seen vertex is held out")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from sapiens_blender.core.body.records import body_from_maps
    from sapiens_blender.core.maps.canonical import Maps

    rows = []
    for path in sorted(Path(args.maps).glob("*.npz")):
        maps = Maps.load(path)
        body = body_from_maps(maps)
        if body is None:
            continue
        template, fit = body
        for pid in np.asarray(fit.person_ids).tolist():
            score = body_scores(maps, template, fit, int(pid), args.centre)
            if score:
                rows.append((path.stem, int(pid), score))
    print("| photo | body | centre held out (vertices) | part median | carried | one side hidden (vertices) | skin fill | "
          "mirrored | both sides hidden (vertices) | skin fill | continued |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for stem, pid, s in rows:
        cells = [f"{s[k + '_n']} | {s[k + a]:.1f} | {s[k + '_carried']:.1f}" if k + "_n" in s else "- | - | -"
                 for k, a in (("centre", "_median"), ("mirror", "_skin"), ("pair", "_skin"))]
        print(f"| {stem} | #{pid} | " + " | ".join(cells) + " |")
    centre = [s for _, _, s in rows if "centre_n" in s]
    if centre:
        print(f"\ncentre, {len(centre)} bodies: part median {np.mean([s['centre_median'] for s in centre]):.1f}, "
              f"carried {np.mean([s['centre_carried'] for s in centre]):.1f} levels (mean of bodies); carried better on "
              f"{sum(s['centre_carried'] < s['centre_median'] for s in centre)} of {len(centre)}")
    if centre:
        parts = {}
        for s in centre:
            for name, (m, c, n) in s["centre_parts"].items():
                acc = parts.setdefault(name, [0.0, 0.0, 0])
                acc[0], acc[1], acc[2] = acc[0] + m, acc[1] + c, acc[2] + n
        print("centre by part (all bodies' held-out vertices): " + "; ".join(
            f"{name} {m / n:.1f} -> {c / n:.1f} ({n})" for name, (m, c, n) in sorted(parts.items())))
    for key, what, how in (("mirror", "a side part hidden", "mirrored"), ("pair", "both sides hidden", "continued")):
        got = [s for _, _, s in rows if key + "_n" in s]
        if got:
            print(f"{what}, {len(got)} bodies: skin fill {np.mean([s[key + '_skin'] for s in got]):.1f}, {how} "
                  f"{np.mean([s[key + '_carried'] for s in got]):.1f} levels; {how} better on "
                  f"{sum(s[key + '_carried'] < s[key + '_skin'] for s in got)} of {len(got)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
