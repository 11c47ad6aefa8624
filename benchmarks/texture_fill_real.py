# SPDX-License-Identifier: GPL-3.0-or-later
"""How well a fitted body's texture guesses what the camera did not see, on real photos.

The hidden back of a body has no photo to score against, so this holds out what the photo does
show and guesses it as the hidden side is guessed (``surface.carry_colours``):

- **centre**: of every body part, the vertices the camera sees most squarely (facing cosine over
  ``--centre``, the middle of the part as seen) are hidden; the rest of the part (its sides as
  seen) are all the fill may use. Like the back of a torso, the held-out middle lies between the
  seen sides. Guessed by the part's median seen colour (the fill before carrying) and by the
  colours carried round the part.
- **mirror**: each side part (a leg, an arm, a foot) both of whose sides are seen is hidden whole
  and guessed from its mirror image on the other side, against the neutral skin fill a part
  barely seen took before.

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
    from sapiens_blender.core.body import surface as bs

    i = fit.index(person_id)
    v = np.asarray(fit.vertices[i], np.float64)
    rest = np.asarray(fit.rest_vertices[i], np.float64)
    f = np.asarray(template.faces, np.int64)
    vertex_part = bs.vertex_parts_of(f, bs.face_parts(f, template.vertex_parts), len(v))
    zbuf = bs.depth_buffer(v, f, maps.intrinsics, maps.width, maps.height)
    observed = bs.observed_points(maps) if maps.metric else None
    seed, worn, colour = bs.photo_colours(maps, person_id, v, f, vertex_part, zbuf, observed, template.part_names)
    if seed.sum() < 200:
        return None
    normals = bs.vertex_normals(v, f)
    facing = np.einsum("ij,ij->i", normals, -v / np.linalg.norm(v, axis=1, keepdims=True))
    out = {}
    held = seed & (facing > centre)
    kept = seed & ~held
    median = _part_medians(colour, kept, vertex_part)
    carried = bs.carry_colours(kept, worn, colour, vertex_part, f, np.concatenate([median, median], 1), False)[:, :3]
    if held.sum() >= 50:
        out["centre_median"] = _err(median[held], colour[held])
        out["centre_carried"] = _err(carried[held], colour[held])
        out["centre_n"] = int(held.sum())
        out["centre_parts"] = {template.part_names[p]: (np.abs(median[held & (vertex_part == p)] - colour[held & (vertex_part == p)]).mean(1).sum(),
                                                        np.abs(carried[held & (vertex_part == p)] - colour[held & (vertex_part == p)]).mean(1).sum(),
                                                        int((held & (vertex_part == p)).sum()))
                               for p in np.unique(vertex_part[held])}
    partners = bs.side_partners(template.part_names)
    per_part = np.bincount(vertex_part, minlength=len(template.part_names))
    seeded = np.bincount(vertex_part[seed], minlength=len(per_part))
    enough = seeded >= bs.MIN_SEEN_FOR_FILL * np.maximum(per_part, 1)
    mirror, skin, n = [], [], 0
    for part, partner in partners.items():
        if not (enough[part] and enough[partner]):
            continue
        hidden = seed & (vertex_part == part)
        guess = bs.carry_colours(seed & (vertex_part != part), worn, colour, vertex_part, f,
                                 np.concatenate([median, median], 1), False, template.part_names, rest)[:, :3]
        mirror.append(_err(guess[hidden], colour[hidden]) * hidden.sum())
        skin.append(_err(np.broadcast_to(bs.SKIN_FILL.astype(float), colour[hidden].shape), colour[hidden]) * hidden.sum())
        n += int(hidden.sum())
    if n:
        out["mirror_carried"], out["mirror_skin"], out["mirror_n"] = sum(mirror) / n, sum(skin) / n, n
    return out


def _part_medians(colour, kept, vertex_part) -> np.ndarray:
    """The fill before carrying, per vertex: its part's median kept colour (skin if too few)."""
    from sapiens_blender.core.body import surface as bs

    out = np.tile(bs.SKIN_FILL.astype(np.float64), (len(colour), 1))
    per_part = np.bincount(vertex_part)
    for part in np.unique(vertex_part[kept]):
        of_part = kept & (vertex_part == part)
        if of_part.sum() >= bs.MIN_SEEN_FOR_FILL * per_part[part]:  # as carry_colours decides
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
    print("| photo | body | centre held out (vertices) | part median | carried | mirror held out (vertices) | skin fill | mirrored |")
    print("|---|---|---|---|---|---|---|---|")
    for stem, pid, s in rows:
        c = (f"{s['centre_n']} | {s['centre_median']:.1f} | {s['centre_carried']:.1f}" if "centre_n" in s else "- | - | -")
        m = (f"{s['mirror_n']} | {s['mirror_skin']:.1f} | {s['mirror_carried']:.1f}" if "mirror_n" in s else "- | - | -")
        print(f"| {stem} | #{pid} | {c} | {m} |")
    centre = [s for _, _, s in rows if "centre_n" in s]
    mirror = [s for _, _, s in rows if "mirror_n" in s]
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
    if mirror:
        print(f"mirror, {len(mirror)} bodies: skin fill {np.mean([s['mirror_skin'] for s in mirror]):.1f}, "
              f"mirrored {np.mean([s['mirror_carried'] for s in mirror]):.1f} levels; mirrored better on "
              f"{sum(s['mirror_carried'] < s['mirror_skin'] for s in mirror)} of {len(mirror)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
