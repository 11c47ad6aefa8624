# SPDX-License-Identifier: GPL-3.0-or-later
"""Keep the analysis inside the .blend so builders can re-run after the file is reopened.

The maps' compressed .npz bytes live in a byte-string custom property of a Text data-block
("Sapiens Analysis"); the text itself holds a readable summary. Byte-string ID properties are
saved verbatim in the .blend (measured: 20 MB round-trips bit-exactly, reopening takes ~0.05 s),
need no side file that could get lost, and the Text (with a fake user) is not shown in any
editor by default. The scene points at it through `scene.sapiens.analysis`.
"""

from __future__ import annotations

import json

import bpy

from ..core.maps.canonical import Maps, MapsError

NPZ_KEY = "sapiens_maps_npz"
TEXT_NAME = "Sapiens Analysis"


def store_analysis(scene: bpy.types.Scene, maps: Maps, photo: str = "") -> bpy.types.Text:
    """Save `maps` into the .blend and make it the scene's current analysis."""
    data = maps.to_bytes()
    text = bpy.data.texts.new(TEXT_NAME)
    text.use_fake_user = True  # survives save/reload even if nothing else points at it
    text[NPZ_KEY] = data
    summary = {
        "photo": photo,
        "source": maps.source,
        "size": [maps.width, maps.height],
        "people": maps.person_ids,
        "metric": bool(maps.metric),
        "npz_bytes": len(data),
    }
    text.write("Sapiens analysis (the maps are stored in this text's custom property "
               f"'{NPZ_KEY}').\n" + json.dumps(summary, indent=1) + "\n")
    scene.sapiens.analysis = text
    return text


def has_analysis(scene: bpy.types.Scene) -> bool:
    text = scene.sapiens.analysis
    return text is not None and NPZ_KEY in text.keys()


def load_analysis(scene: bpy.types.Scene) -> Maps:
    """The scene's stored maps; MapsError with a clear message when there is none."""
    text = scene.sapiens.analysis
    if text is None or NPZ_KEY not in text.keys():
        raise MapsError("This scene has no Sapiens analysis yet: pick a photo and click Analyze.")
    return Maps.from_bytes(text[NPZ_KEY], "the analysis stored in this .blend file")


def analysis_summary(scene: bpy.types.Scene) -> dict:
    """The summary written next to the maps (cheap: no decompression), {} when none."""
    text = scene.sapiens.analysis
    if text is None:
        return {}
    try:
        return json.loads(text.as_string().split("\n", 1)[1])
    except (IndexError, ValueError):
        return {}
