# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures that need the body model (anny): it is loaded ONCE per test session (its first load on
a machine builds anny's ~0.8 GB cache, ~80 s), and the scenes made from it are cached.

``body`` is the one load (the fit's ``BodyModel``); the others build on it:
``body_model`` (anny + COCO regressor, for ground-truth scenes), ``gt_scene`` (ray-cast
ground-truth scenes), ``body_scene`` (fitted bodies in maps) and ``body_model_scene``.
A test that asks for one of them is skipped when anny (or the ray caster) is missing, and fails
under CI (tests/conftest.py). Tests that import ``scenes`` or ``body_scenes`` at module level
say so themselves with ``pytest.importorskip``.
"""

import os

import pytest

# name -> (pose, shape, yaw degrees): three poses, three body shapes.
SCENE_SPECS = {
    "arms_bent": ("arms_bent", "average", 0.0),
    "arms_raised_heavy": ("arms_raised", "heavy_tall", 25.0),
    "across_slim": ("across", "slim_short", -20.0),
}


def _need(*modules: str) -> None:
    for name in modules:
        pytest.importorskip(name, reason=f"{name} (test dependency) is needed for body-model scenes")


@pytest.fixture(scope="session")
def body():
    """The fit's body model (anny on torch, CPU float32): the session's one load."""
    if os.environ.get("CI"):  # a missing install step must fail under CI, not skip
        import torch  # noqa: F401
    _need("anny")
    from inference_server.fit.body_model import BodyModel

    return BodyModel.load()


@pytest.fixture(scope="session")
def body_model(body):
    """(anny model, COCO regressor): the same instance as ``body``, with the COCO regressor."""
    _need("trimesh", "embreex")
    import scenes

    return scenes.load_body_model()


@pytest.fixture(scope="session")
def gt_scene(body_model):
    """Factory: gt_scene(name) -> scenes.Scene for a name in SCENE_SPECS, or "two_people"."""
    import scenes

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


@pytest.fixture(scope="session")
def body_model_scene(body_model):
    """A small ground-truth scene: one person, arms bent, 160x120 pixels."""
    import scenes

    return scenes.make_scene("arms_bent", "average", 0.0, size=(160, 120))


@pytest.fixture(scope="session")
def body_scene(body_model):
    """Factory: body_scene(name) -> body_scenes.BodyScene (cached per name)."""
    import body_scenes

    cache = {}

    def get(name: str = "standing"):
        if name not in cache:
            cache[name] = body_scenes.make(name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def scan_case(body_model):
    """Factory: scan_case(views, size, camera) -> scan_scenes.ScanCase (a dressed, patterned body
    turning before the camera, or ``camera="orbit"``: a camera going round it; cached per arguments)."""
    import scan_scenes

    cache = {}

    def get(views: int = 6, size=(200, 150), camera: str = "turn"):
        if (views, size, camera) not in cache:
            cache[(views, size, camera)] = scan_scenes.make(views=views, size=size, camera=camera)
        return cache[(views, size, camera)]

    return get
