# SPDX-License-Identifier: GPL-3.0-or-later
"""Ground-truth fixtures: anny is loaded once per test session and scenes are cached.

Other test modules in this folder (e.g. the Blender builders' ground-truth tests) can use the
``gt_scene`` factory fixture or import ``scenes`` directly (this folder is on sys.path under
pytest's default import mode).
"""

import pytest

pytest.importorskip("anny", reason="anny (test dependency) is needed for ground-truth scenes")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast ground-truth scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast ground-truth scenes")

import scenes  # noqa: E402  (after the skips)

# name -> (pose, shape, yaw degrees): three poses, three body shapes.
SCENE_SPECS = {
    "arms_bent": ("arms_bent", "average", 0.0),
    "arms_raised_heavy": ("arms_raised", "heavy_tall", 25.0),
    "across_slim": ("across", "slim_short", -20.0),
}


@pytest.fixture(scope="session")
def body_model():
    """(anny model, COCO regressor), loaded once (the first run builds ~/.cache/anny)."""
    return scenes.load_body_model()


@pytest.fixture(scope="session")
def gt_scene(body_model):
    """Factory: gt_scene(name) -> scenes.Scene for a name in SCENE_SPECS, or "two_people"."""
    cache = {}

    def get(name: str):
        if name not in cache:
            if name == "two_people":
                cache[name] = scenes.make_two_people_scene()
            else:
                pose, shape, yaw = SCENE_SPECS[name]
                cache[name] = scenes.make_scene(pose, shape, yaw)
        return cache[name]

    return get
