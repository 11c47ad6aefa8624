# SPDX-License-Identifier: GPL-3.0-or-later
"""Same input, same bytes: building a real photo's maps three times gives one .glb.

The maps come from the bundled photo through the offline CPU backend (a real server). Blender
computes tangents in parallel and the glTF exporter rounds them to 4 decimals, so before the
fix a few tangents flipped their last digit from run to run (docs/cli.md promises identical
re-runs)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest
from repo_paths import REPO

pytest.importorskip("bpy")
pytest.importorskip("mediapipe")

pytestmark = [pytest.mark.bpy]

ENTRY = "import sys; from sapiens_blender.cli import main; sys.exit(main())"
PHOTO = REPO / "sapiens_blender" / "data" / "astronaut.jpg"


def cli(*args):
    return subprocess.run([sys.executable, "-c", ENTRY, *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_three_builds_of_a_real_photos_maps_are_byte_identical(tmp_path):
    analysed = cli("analyze", PHOTO, "--out", tmp_path, "--no-previews", "--model", "auto")
    assert analysed.returncode == 0, analysed.stderr[-2000:]
    maps = tmp_path / "astronaut.npz"
    digests = set()
    for i in range(3):
        out = tmp_path / f"run{i}.glb"
        proc = cli("build", "--maps", maps, "-o", out)
        assert proc.returncode == 0, proc.stderr[-2000:]
        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
    assert len(digests) == 1, "the same maps built into different .glb files"


def _blocks(data: bytes) -> list[tuple]:
    """(code, struct index, old address, length) of each block of a .blend (Blender 5's
    format: a 17-byte file header, then 32-byte block headers)."""
    import struct

    assert data[:12] == b"BLENDER17-01", data[:17]
    out, offset = [], 17
    while offset < len(data):
        code, sdna, old, length, _ = struct.unpack("<4siQqq", data[offset:offset + 32])
        out.append((code, sdna, old, length, data[offset + 32:offset + 32 + length]))
        offset += 32 + length
        if code == b"ENDB":
            break
    return out


def test_same_maps_give_the_same_fbx_and_glb_bytes(tmp_path):
    """Two processes (each with its own salt for Python's str hashes) build one maps file into
    the same outputs: .glb and .fbx are byte-identical and the .fbx names no temporary file;
    the .blend differs only where docs/cli.md says (values, never its layout)."""
    from synthetic_scene import ellipsoid_maps

    from sapiens_blender.core.files.atomic import TEMP_MARK

    maps = tmp_path / "shot.npz"
    ellipsoid_maps(128, 96).save(maps)
    outs = [tmp_path / f"shot{s}" for s in (".glb", ".fbx", ".blend")]
    runs = []
    for _ in range(2):
        proc = cli("build", "--maps", maps, *[a for o in outs for a in ("-o", o)])
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append([o.read_bytes() for o in outs])
    (glb1, fbx1, blend1), (glb2, fbx2, blend2) = runs
    assert glb1 == glb2
    assert TEMP_MARK.encode() not in fbx1 and b"shot.fbm" in fbx1  # named after the output itself
    assert fbx1 == fbx2
    first, second = _blocks(blend1), _blocks(blend2)
    assert [b[:4] for b in first] == [b[:4] for b in second]  # same blocks, addresses, sizes
    differing = sum(x[4] != y[4] for x, y in zip(first, second))
    # Measured: 57 of 3,256 blocks (the file's global block, the mesh's face-set colour seed,
    # node identifiers, packed-image records), 8,867 of 1,067,238 bytes.
    assert differing < len(first) // 20
