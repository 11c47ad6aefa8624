# SPDX-License-Identifier: GPL-3.0-or-later
"""Dynamic batching in-process: the Sapiens2 backend's analyze_batch stacks several photos into ONE
forward pass per task (counted with forward hooks on the real transformers models) and gives the
same maps as analysing the photos one by one; a photo cancelled mid-batch leaves it alone."""

import numpy as np
import pytest
from tiny_models import offline_hub, photo, tiny_hub  # noqa: F401

from inference_server.dataplane.base import AnalyzeOptions, Cancelled, CancelToken

pytest.importorskip("torch")
pytest.importorskip("transformers")
from inference_server.backends import sapiens2  # noqa: E402

pytestmark = [pytest.mark.torch]

SIZES = [(120, 90), (100, 100), (80, 120)]  # different aspects: each photo has its own pad plan


@pytest.fixture
def backend(tiny_hub, offline_hub):
    offline_hub(tiny_hub)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", precision="fp32")
    b.load()
    yield b
    b.unload()


def count_forwards(backend) -> dict:
    """task -> batch sizes of every forward call, recorded by hooks on the real models."""
    calls: dict = {}
    for task, model in backend.models.items():
        def hook(module, args, kwargs, task=task):
            x = kwargs.get("pixel_values", args[0] if args else None)
            calls.setdefault(task, []).append(int(x.shape[0]))
        model.register_forward_pre_hook(hook, with_kwargs=True)
    return calls


def assert_same_maps(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for key in a:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.shape == y.shape, key
        if x.dtype.kind == "f":
            # keypoints in px: sub-pixel refinement amplifies the float noise of a batched matmul
            atol = 1e-2 if key == "keypoints" else 1e-4
            np.testing.assert_allclose(x, y, rtol=1e-4, atol=atol, equal_nan=True, err_msg=key)
        else:
            assert x.tolist() == y.tolist(), key


@pytest.mark.slow
def test_batch_equals_one_by_one_with_one_forward_per_task(backend):
    photos = [photo(h, w, seed=i) for i, (h, w) in enumerate(SIZES)]
    options = [AnalyzeOptions(max_side=128) for _ in photos]
    calls = count_forwards(backend)
    single = [backend.analyze(p, o) for p, o in zip(photos, options)]
    # pose runs twice per photo: the crops and their mirror images (flip test, on by default)
    assert calls == {"seg": [1, 1, 1], "depth": [1, 1, 1], "normal": [1, 1, 1], "pose": [1, 1, 1, 1, 1, 1]}
    calls.clear()
    events = [[] for _ in photos]
    batched = backend.analyze_batch(photos, options, [lambda *e, ev=ev: ev.append(e) for ev in events])
    assert calls == {"seg": [3], "depth": [3], "normal": [3], "pose": [3, 3]}
    for one, many in zip(single, batched):
        assert_same_maps(one, many)
    for ev in events:  # each request got its own progress, ending done
        assert [e[0] for e in ev] == ["seg", "depth", "normal", "pose", "done"] and ev[-1][1] == 1.0


def test_cancelled_photo_leaves_the_batch_and_the_others_finish(backend):
    photos = [photo(h, w, seed=i) for i, (h, w) in enumerate(SIZES)]
    tokens = [CancelToken() for _ in photos]

    def cancel_second_at_depth(stage, fraction, message):
        if stage == "depth":
            tokens[1].cancel()  # while the batch runs: it must drop out at the next task

    progress = [lambda *e: None, cancel_second_at_depth, lambda *e: None]
    calls = count_forwards(backend)
    out = backend.analyze_batch(photos, [AnalyzeOptions(max_side=128)] * 3, progress, tokens)
    assert isinstance(out[1], Cancelled)
    assert calls["depth"] == [3] and calls["normal"] == [2] and calls["pose"] == [2, 2]
    for i in (0, 2):
        assert out[i]["keypoints"].shape == (1, 308, 3) and np.isfinite(out[i]["normal"][out[i]["mask"] > 0]).all()


def test_auto_batches_like_the_model_it_resolves_to(tiny_hub, offline_hub, monkeypatch):
    """`analyze --parallel` promises batching for `auto`: its slot batches when auto resolves to
    Sapiens2, and its analyze_batch is Sapiens2's (one forward per task), source saying why."""
    from inference_server.backends import auto
    from inference_server.dataplane import base
    from inference_server.dataplane.models import ModelSlot

    offline_hub(tiny_hub)
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    base.register("sapiens2-0.4b", lambda: sapiens2.Sapiens2Backend("0.4b", device="cpu", precision="fp32"))
    base.register("auto", lambda: auto.AutoBackend(chooser=lambda: ("sapiens2-0.4b", "test: GPU stand-in")))
    slot = ModelSlot("auto")
    assert slot.batching
    slot.backend.load()
    calls = count_forwards(slot.backend._inner)
    photos = [photo(h, w, seed=i) for i, (h, w) in enumerate(SIZES)]
    out = slot.backend.analyze_batch(photos, [AnalyzeOptions(max_side=96, tasks=("seg",)) for _ in photos])
    assert calls == {"seg": [3]}
    assert all("(auto: test: GPU stand-in)" in m["source"] for m in out)
    from inference_server.backends import mediapipe_cpu

    mediapipe_cpu.register_all()
    base.register("auto", lambda: auto.AutoBackend(chooser=lambda: ("mediapipe", "no GPU")))
    offline = auto.AutoBackend(chooser=lambda: ("mediapipe", "no GPU"))
    assert offline.batching is False and offline.choice == "mediapipe"  # one by one: no batching
    slot.backend.unload()


def test_flip_test_is_on_by_default_and_can_be_turned_off(backend):
    """The Sapiens2 pose configs test with the mirrored crop: so do we unless flip_test=false."""
    from inference_server.dataplane.models import parse_options

    assert AnalyzeOptions().flip_test and parse_options({}).flip_test
    assert parse_options({"flip_test": False}).flip_test is False
    calls = count_forwards(backend)
    image = photo(120, 90)
    with_flip = backend.analyze(image, AnalyzeOptions(max_side=96, tasks=("seg", "pose")))
    assert calls["pose"] == [1, 1]
    calls.clear()
    without = backend.analyze(image, AnalyzeOptions(max_side=96, tasks=("seg", "pose"), flip_test=False))
    assert calls["pose"] == [1]
    assert not np.allclose(with_flip["keypoints"], without["keypoints"])


def test_flip_in_one_forward_gives_the_same_keypoints(backend, monkeypatch):
    """On an accelerator the flipped crops share the crops' forward (a batch of 2n); forced on
    here on the CPU: one pose forward instead of two, the same keypoints as the two forwards."""
    from inference_server.backends import sapiens_pose

    image = photo(120, 90)
    options = AnalyzeOptions(max_side=96, tasks=("seg", "pose"))
    calls = count_forwards(backend)
    two = backend.analyze(image, options)
    assert calls["pose"] == [1, 1]
    calls.clear()
    monkeypatch.setattr(sapiens_pose, "FLIP_IN_ONE_FORWARD", True)
    one = backend.analyze(image, options)
    assert calls["pose"] == [2]
    assert_same_maps(one, two)
