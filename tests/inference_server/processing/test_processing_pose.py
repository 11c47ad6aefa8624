# SPDX-License-Identifier: GPL-3.0-or-later
"""Pose post-processing with known answers, and against transformers' own Sapiens2 reference code.

transformers' Sapiens2 image processor imports torchvision (not installed, and not a dependency of
ours); its decoding functions only use torchvision's gaussian_blur. We load that reference module
with a stand-in for ``torchvision.transforms.v2.functional.gaussian_blur`` written from
torchvision's documented algorithm (separable Gaussian, reflect padding), then compare numbers.
"""

import sys
import types

import numpy as np
import pytest

from inference_server.processing import heatmaps
from inference_server.processing.goliath import FLIP_PAIRS

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.torch]


def _torchvision_gaussian_blur(img, kernel_size, sigma):
    k = kernel_size[0]
    half = (k - 1) * 0.5
    x = torch.linspace(-half, half, steps=k, dtype=torch.float32)
    taps = torch.exp(-0.5 * (x / sigma[0]) ** 2)
    taps = taps / taps.sum()
    squeeze = img.ndim == 3
    t = img.unsqueeze(1) if squeeze else img
    t = torch.nn.functional.pad(t.reshape(-1, 1, *t.shape[-2:]), [k // 2] * 4, mode="reflect")
    t = torch.nn.functional.conv2d(t, taps.view(1, 1, 1, k))
    t = torch.nn.functional.conv2d(t, taps.view(1, 1, k, 1))
    return t.reshape(img.shape)


@pytest.fixture(scope="module")
def reference():
    names = ["torchvision", "torchvision.transforms", "torchvision.transforms.v2",
             "torchvision.transforms.v2.functional"]
    import importlib.machinery

    from transformers.utils import import_utils

    import_utils.is_torchvision_available()  # cached False before the stand-in appears
    saved = {n: sys.modules.get(n) for n in names}
    if saved["torchvision"] is None:
        for n in names:
            sys.modules[n] = types.ModuleType(n)
            sys.modules[n].__spec__ = importlib.machinery.ModuleSpec(n, None)
        sys.modules["torchvision.transforms.v2.functional"].gaussian_blur = _torchvision_gaussian_blur
        sys.modules["torchvision.transforms.v2"].functional = sys.modules["torchvision.transforms.v2.functional"]
    try:
        yield importlib.import_module("transformers.models.sapiens2.image_processing_sapiens2")
    finally:
        sys.modules.pop("transformers.models.sapiens2.image_processing_sapiens2", None)
        for n, mod in saved.items():
            if mod is None:
                sys.modules.pop(n, None)


@pytest.mark.parametrize("sigma", [2.0, 6.0])
@pytest.mark.parametrize("spot", [(37.3, 51.7), (10.85, 20.15), (12.6, 50.4)])
def test_gaussian_peak_decodes_to_its_subpixel_spot(sigma, spot):
    hm = heatmaps.gaussian_heatmap((64, 48), spot, sigma)[None, None]
    xy, score = heatmaps.decode_heatmaps(hm)
    assert np.hypot(*(xy[0, 0] - spot)) < 0.1
    assert score[0, 0] == pytest.approx(hm.max())


def test_crop_and_back_projection_recover_image_keypoints_within_a_tenth_of_a_pixel():
    boxes = np.array([[120.0, 40.0, 260.0, 410.0], [300.0, 200.0, 330.0, 231.0]])
    centre, size = heatmaps.crop_params(boxes, aspect_wh=192 / 256)
    assert np.allclose(size[:, 0] / size[:, 1], 0.75)
    assert np.all(size[:, 0] >= (boxes[:, 2] - boxes[:, 0] + 1) * 1.25 - 1e-9)
    truth = np.array([[[180.4, 100.8], [231.25, 377.6]], [[310.7, 215.3], [322.1, 228.9]]])
    spots = heatmaps.image_to_heatmap(truth, centre, size, (256, 192))
    hm = np.stack([np.stack([heatmaps.gaussian_heatmap((256, 192), s, 6.0) for s in person])
                   for person in spots])
    xy, _ = heatmaps.decode_heatmaps(hm)
    back = heatmaps.heatmap_to_image(xy, centre, size, (256, 192))
    assert np.abs(back - truth).max() < 0.1


def test_flip_back_unmirrors_and_swaps_left_right():
    rng = np.random.default_rng(1)
    h, w, k = 32, 24, 308
    spots = np.stack([rng.uniform(3, w - 4, k), rng.uniform(3, h - 4, k)], -1)
    upright = np.stack([heatmaps.gaussian_heatmap((h, w), s, 1.5) for s in spots])[None]
    partner = np.arange(k)
    for a, b in FLIP_PAIRS:
        partner[a], partner[b] = b, a
    # What a model sees on the mirrored crop: keypoint j sits where its partner was, mirrored.
    mirrored = np.stack([heatmaps.gaussian_heatmap((h, w), (w - 1 - spots[partner[j], 0], spots[partner[j], 1]), 1.5)
                         for j in range(k)])[None]
    restored = heatmaps.flip_back(mirrored, FLIP_PAIRS)
    assert np.allclose(restored, upright, atol=1e-9)


def test_absent_keypoint_has_no_location():
    hm = np.zeros((1, 2, 16, 12))
    hm[0, 1] = heatmaps.gaussian_heatmap((16, 12), (5.2, 7.7), 2.0)
    xy, score = heatmaps.decode_heatmaps(hm)
    assert score[0, 0] == 0 and np.all(xy[0, 0] == -1)
    assert np.hypot(*(xy[0, 1] - (5.2, 7.7))) < 0.1


def test_decode_matches_transformers_reference(reference):
    rng = np.random.default_rng(7)
    n, k, h, w = 2, 12, 64, 48
    hm = np.zeros((n, k, h, w))
    for i in range(n):
        for j in range(k):
            hm[i, j] = 0.9 * heatmaps.gaussian_heatmap((h, w), rng.uniform(2, [w - 3, h - 3]), rng.uniform(2, 6))
            hm[i, j] += 0.3 * heatmaps.gaussian_heatmap((h, w), rng.uniform(2, [w - 3, h - 3]), 3.0)
    hm += rng.normal(0, 0.01, hm.shape)
    ours, our_scores = heatmaps.decode_heatmaps(hm)
    t = torch.from_numpy(hm.astype(np.float32))
    loc, scores = reference.get_keypoint_predictions(t)
    ref = reference.post_dark_unbiased_data_processing(loc, t, blur_kernel_size=11).numpy()
    assert np.allclose(our_scores, scores.numpy(), atol=1e-6)
    assert np.abs(ours - ref).max() < 2e-3


def test_crop_geometry_matches_transformers_reference(reference):
    from inference_server.processing.resize_pad import crop_people

    boxes = np.array([[10.0, 5.0, 40.0, 70.0], [2.0, 30.0, 90.0, 50.0]])
    centre, size = heatmaps.crop_params(boxes, aspect_wh=48 / 64)
    xywh = torch.tensor(np.c_[boxes[:, :2], boxes[:, 2:] - boxes[:, :2] + 1], dtype=torch.float32)
    ref_c, ref_s = reference.boxes_to_crop_params(reference.box_xywh_to_cxcywh(xywh), output_size=(64, 48))
    # transformers' boxes are (x, y, w, h) with the centre at x + w/2; ours are inclusive pixel
    # extents with the centre at the middle pixel: the same crop, half a pixel apart by definition.
    assert np.allclose(size, ref_s.numpy(), atol=1e-4)
    assert np.allclose(centre + 0.5, ref_c.numpy(), atol=1e-4)
    rng = np.random.default_rng(3)
    photo = torch.from_numpy(rng.uniform(0, 255, (1, 3, 80, 96)).astype(np.float32))
    ours = crop_people(photo, ref_c.numpy(), ref_s.numpy(), (64, 48), (0, 0, 0), (1, 1, 1))
    ref = reference.crop_and_resize(photo[0], torch.cat([ref_c, ref_s], -1), output_size=(64, 48), padding=1.0)
    assert torch.allclose(ours, ref, atol=1e-3)


def _peaked_random_heatmaps(rng, shape):
    """Uniform noise with one Gaussian peak per map (anywhere, borders included), float32."""
    n, k, h, w = shape
    hm = rng.random(shape).astype(np.float32) * 0.3
    for i in range(n):
        for j in range(k):
            hm[i, j] += heatmaps.gaussian_heatmap((h, w), rng.uniform(0, [w - 1, h - 1]), rng.uniform(1.5, 4))
    hm[0, 0] = 0.0  # an absent keypoint
    return hm


@pytest.mark.parametrize("banded", [True, False], ids=["cpu-matmul-blur", "shifted-add-blur"])
def test_device_blur_equals_the_numpy_reference_blur(banded):
    rng = np.random.default_rng(5)
    hm = rng.random((2, 7, 40, 29)).astype(np.float32)
    from scipy.ndimage import correlate1d

    taps = heatmaps._blur_taps(11)
    ref = correlate1d(correlate1d(hm.astype(np.float64), taps, axis=-1, mode="constant"), taps, axis=-2,
                      mode="constant")
    ours = heatmaps._blur_torch(torch.from_numpy(hm), 11, banded=banded).numpy()
    assert np.abs(ours - ref).max() < 1e-6


@pytest.mark.parametrize("banded", [None, False], ids=["cpu-matmul-blur", "shifted-add-blur"])
def test_device_decode_equals_the_host_decode(monkeypatch, banded):
    """The pipeline decodes on the model's device; it must give the numpy decoder's keypoints."""
    rng = np.random.default_rng(11)
    hm = _peaked_random_heatmaps(rng, (3, 24, 64, 48))
    hm[1] = rng.random(hm[1].shape)  # pure noise maps: peaks that are not Gaussian-like
    if banded is not None:  # the GPU's blur, checked on the CPU
        blur = heatmaps._blur_torch
        monkeypatch.setattr(heatmaps, "_blur_torch", lambda t, k: blur(t, k, banded=banded))
    ref_xy, ref_score = heatmaps.decode_heatmaps(hm)
    xy, score = heatmaps.decode_heatmaps_torch(torch.from_numpy(hm))
    assert np.array_equal(score, ref_score)
    assert np.all(xy[0, 0] == -1)
    assert np.abs(xy - ref_xy).max() < 1e-4


def test_device_decode_of_tiny_maps_and_full_size_maps():
    rng = np.random.default_rng(2)
    tiny = rng.random((1, 3, 2, 5)).astype(np.float32)
    assert all(np.array_equal(a, b) for a, b in zip(heatmaps.decode_heatmaps(tiny),
                                                    heatmaps.decode_heatmaps_torch(torch.from_numpy(tiny))))
    full = _peaked_random_heatmaps(rng, (1, 16, 256, 192))  # the released models' heatmap size
    ref_xy, _ = heatmaps.decode_heatmaps(full)
    xy, _ = heatmaps.decode_heatmaps_torch(torch.from_numpy(full))
    assert np.abs(xy - ref_xy).max() < 1e-4


def test_device_flip_back_equals_the_host_flip_back():
    rng = np.random.default_rng(4)
    hm = rng.random((2, 308, 8, 6)).astype(np.float32)
    assert np.array_equal(heatmaps.flip_back_torch(torch.from_numpy(hm), FLIP_PAIRS).numpy(),
                          heatmaps.flip_back(hm, FLIP_PAIRS))


def test_mirror_order_pairs_left_with_right_and_keeps_the_middle():
    from inference_server.processing.goliath import mirror_order

    names = ("nose", "left_eye", "right_eye", "mouth_left", "mouth_right", "left_hip", "neck", "right_hip")
    order = mirror_order(names)
    assert order == (0, 2, 1, 4, 3, 7, 6, 5)
    assert tuple(order[i] for i in order) == tuple(range(len(names)))  # mirroring twice is no change
    assert mirror_order(("left_wrist",)) == (0,)  # no partner: itself
