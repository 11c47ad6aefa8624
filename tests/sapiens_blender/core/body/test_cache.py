# SPDX-License-Identifier: GPL-3.0-or-later
"""The user's template cache: keyed by body-model version, written atomically, a damaged file
fetched again.

On bodies made by the fit's own body model (tests/support/body_scenes.py).
"""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import cache as body_cache

pytestmark = [pytest.mark.anny]


def test_template_cache_is_keyed_by_version_and_written_atomically(body_scene, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    template = body_scene("standing").template
    assert body_cache.load_cached_template(template.body_version) is None
    path = body_cache.save_cached_template(template)
    assert path.parent == tmp_path / "sapiens_blender" / "body" and "/" not in path.name
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    cached = body_cache.load_cached_template(template.body_version)
    assert np.array_equal(cached.faces, template.faces) and cached.joint_names == template.joint_names
    assert body_cache.load_cached_template("anny-9/anny/9") is None
    path.write_bytes(b"damaged")
    assert body_cache.load_cached_template(template.body_version) is None  # fetched again, no crash
