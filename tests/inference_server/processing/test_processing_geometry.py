# SPDX-License-Identifier: GPL-3.0-or-later
"""Known-answer tests of the family-independent conversions: intrinsics, normals and their
self-calibration, padding removal, people from the foreground, relative depth scaling."""

import numpy as np
import pytest

from planes import K_TRUE, PLANE_NORMAL, tilted_plane

from inference_server.processing import depth_scale, instances, intrinsics, normals

pytestmark = [pytest.mark.torch]


def test_tilted_plane_gives_intrinsics_depth_and_normals():
    pts = tilted_plane()
    k, rms = intrinsics.fit_intrinsics(pts)
    assert np.allclose(k, K_TRUE, rtol=1e-4, atol=1e-2) and rms < 1e-2
    n = normals.normals_from_points(pts)
    inner = n[1:-1, 1:-1]
    assert np.all(np.isfinite(inner)) and np.all(np.isnan(n[0]))
    assert np.degrees(np.arccos(np.clip(inner @ PLANE_NORMAL, -1, 1))).max() < 0.05
    # Depth is Z (along the axis), not the distance along the ray.
    centre_ray_z = pts[48, 36, 2]
    assert centre_ray_z == pytest.approx(np.linalg.norm(pts[48, 36]) * pts[48, 36, 2] / np.linalg.norm(pts[48, 36]))


def test_fit_refuses_degenerate_pointmaps():
    flat = np.zeros((20, 20, 3), np.float32)
    flat[..., 2] = 2.0
    assert intrinsics.fit_intrinsics(flat)[0] is None  # no spread of X/Z
    assert intrinsics.fit_intrinsics(np.full((4, 4, 3), np.nan, np.float32))[0] is None


def test_default_intrinsics_documented_field_of_view():
    k = intrinsics.default_intrinsics(1024, 768)
    assert k[0, 0] == k[1, 1] == pytest.approx(768.0)  # Sapiens2's canonical focal at 1024x768
    assert (k[0, 2], k[1, 2]) == (384.0, 512.0)


@pytest.mark.parametrize("flip", [(1, 1, 1), (1, -1, 1), (-1, 1, -1), (1, -1, -1)])
def test_self_calibration_detects_and_corrects_flipped_axes(flip):
    pts = tilted_plane()
    # A curved surface (a bump) so all three axes carry signal.
    yy, xx = np.mgrid[0:96, 0:72]
    pts[..., 2] += 0.3 * np.exp(-((xx - 36) ** 2 + (yy - 48) ** 2) / 300.0)
    reference = normals.normals_from_points(pts)
    rng = np.random.default_rng(0)
    predicted = normals.normalize(reference * np.asarray(flip, np.float32) + rng.normal(0, 0.05, reference.shape))
    cal = normals.calibrate_normal_signs(predicted, reference)
    assert cal.signs == tuple(float(s) for s in flip)
    assert cal.agreement_deg < 5.0
    if flip != (1, 1, 1):
        assert cal.before_deg > 30.0 and cal.flipped_axes != "none"


def test_self_calibration_skips_with_too_few_pixels():
    ref = np.full((4, 4, 3), np.nan, np.float32)
    cal = normals.calibrate_normal_signs(ref, ref)
    assert cal.signs == (1.0, 1.0, 1.0) and np.isnan(cal.agreement_deg) and "skipped" in cal.describe()


torch = pytest.importorskip("torch")


def test_padding_geometry_matches_transformers():
    from transformers.image_utils import get_image_size_for_max_height_width

    from inference_server.processing.resize_pad import plan_input

    for hw in [(100, 50), (50, 100), (1023, 767), (1500, 2000), (20, 15), (768, 1024)]:
        plan = plan_input(hw, (1024, 768), keep_aspect=True)
        nh, nw = get_image_size_for_max_height_width(hw, 1024, 768)
        assert plan.content_hw == (nh, nw)
        assert (plan.top, plan.left) == ((1024 - nh) // 2, (768 - nw) // 2)


def test_normalisation_constants_are_the_reference_ones():
    from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

    from inference_server.processing import resize_pad

    assert np.allclose(resize_pad.SAPIENS2_MEAN, np.array(IMAGENET_DEFAULT_MEAN) * 255)
    assert np.allclose(resize_pad.SAPIENS2_STD, np.array(IMAGENET_DEFAULT_STD) * 255)
    photo = torch.full((1, 3, 8, 6), 0.0)
    photo[:, 0] = 123.675
    plan = resize_pad.plan_input((8, 6), (8, 6), keep_aspect=False)
    x = resize_pad.to_model_input(photo, plan, resize_pad.SAPIENS2_MEAN, resize_pad.SAPIENS2_STD)
    assert torch.allclose(x[0, 0], torch.zeros(8, 6)) and torch.allclose(x[0, 1], torch.tensor(-116.28 / 57.12))


@pytest.mark.parametrize("hw", [(90, 40), (40, 90), (61, 61)])
def test_padding_removal_returns_pixel_aligned_maps(hw):
    """An identity "model": the map it returns is its (padded) input. Cropping the padding and
    resampling back must land every photo pixel on itself: a linear ramp comes back exactly."""
    from inference_server.processing.resize_pad import plan_input, to_model_input, to_photo_grid

    h, w = hw
    ramp = torch.zeros((1, 3, h, w))
    ramp[:, 0] = torch.arange(w, dtype=torch.float32)[None, :] * 2.0 + 10
    ramp[:, 1] = torch.arange(h, dtype=torch.float32)[:, None] * 1.5 + 20
    plan = plan_input(hw, (64, 48), keep_aspect=True)
    assert plan.padded
    model_in = to_model_input(ramp, plan, (0, 0, 0), (1, 1, 1))
    assert model_in.shape[-2:] == (64, 48)
    # outside the content the padding is black
    assert float(model_in[0, 0, :plan.top].abs().sum() + model_in[0, 0, :, :plan.left].abs().sum()) == 0
    back = to_photo_grid(model_in, plan, hw)
    inner = (slice(None), slice(None), slice(2, h - 2), slice(2, w - 2))
    assert torch.allclose(back[inner], ramp[inner], atol=0.35)
    # also at a coarser output resolution (v1 normal/seg heads return half the input size)
    half = torch.nn.functional.interpolate(model_in, scale_factor=0.5, mode="bilinear", align_corners=False)
    back_half = to_photo_grid(half, plan, hw)
    # away from the content border (where a coarse pixel mixes photo and padding), still aligned
    m = int(np.ceil(2 * 2 * h / plan.content_hw[0])) + 1
    coarse_inner = (slice(None), slice(None), slice(m, h - m), slice(m, w - m))
    assert torch.allclose(back_half[coarse_inner], ramp[coarse_inner], atol=0.5)


def test_people_from_foreground_components():
    fg = np.zeros((60, 80), bool)
    fg[5:50, 5:25] = True  # big person
    fg[10:40, 50:70] = True  # smaller person
    fg[52:54, 20:22] = True  # a detached speck near person 1: not a person
    people = instances.label_people(fg)
    assert set(np.unique(people)) == {0, 1, 2}
    assert people[20, 10] == 1 and people[20, 60] == 2 and people[53, 21] == 1
    boxes = instances.person_boxes(people)
    assert boxes[1].tolist() == [50, 10, 69, 39]
    assert boxes[0].tolist() == [5, 5, 24, 53]
    assert instances.label_people(np.zeros((8, 8), bool)).max() == 0


def _label_people_reference(foreground):
    """instances.label_people as it was (whole-image labelling, always the area count and the
    look-up table): the faster one must give the same instance maps."""
    from scipy import ndimage

    fg = np.asarray(foreground, bool)
    out = np.zeros(fg.shape, np.uint8)
    if not fg.any():
        return out
    labels, count = ndimage.label(fg, structure=np.ones((3, 3), bool))
    areas = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    order = np.argsort(-areas, kind="stable")
    keep = [i for i in order if areas[i] >= instances.MIN_FRACTION_OF_LARGEST * areas[order[0]]
            and areas[i] >= instances.MIN_FRACTION_OF_IMAGE * fg.size][:instances.MAX_PEOPLE]
    if not keep:
        return out
    lut = np.zeros(count + 1, np.uint8)
    for new_id, comp in enumerate(keep, start=1):
        lut[comp + 1] = new_id
    people = lut[labels]
    small = fg & (people == 0)
    if small.any():
        _, (iy, ix) = ndimage.distance_transform_edt(people == 0, return_indices=True)
        people[small] = people[iy[small], ix[small]]
    return people


def test_label_people_equals_the_whole_image_labelling():
    from scipy import ndimage

    rng = np.random.default_rng(0)
    masks = [np.ones((40, 30), bool), np.zeros((40, 30), bool)]
    tiny = np.zeros((200, 200), bool)
    tiny[5, 5] = True  # one component below MIN_FRACTION_OF_IMAGE: nobody
    masks.append(tiny)
    for _ in range(30):
        noise = ndimage.gaussian_filter(rng.random((90, 70)), 3.0)
        masks.append(noise > np.quantile(noise, rng.uniform(0.5, 0.97)))
    for fg in masks:
        np.testing.assert_array_equal(instances.label_people(fg), _label_people_reference(fg))


def test_relative_depth_scaling_is_human_sized():
    people = np.zeros((200, 100), np.uint8)
    people[20:190, 30:70] = 1  # 170 px tall
    rel = np.linspace(0, 1, 200 * 100, dtype=np.float32).reshape(200, 100)
    z = depth_scale.relative_depth_to_z(rel, people, focal_y=300.0)
    assert np.isnan(z[0, 0]) and np.all(np.isfinite(z[people > 0]))
    d0 = 300.0 * depth_scale.NOMINAL_HEIGHT_M / 170
    assert np.nanmedian(z) == pytest.approx(d0, abs=0.02)
    assert np.nanmax(z) - np.nanmin(z) == pytest.approx(depth_scale.RELIEF_M, abs=0.01)
    assert z[150, 50] > z[40, 50]  # larger relative value = farther


def _noisy_bumpy_plane(rng, h=120, w=90):
    pts = tilted_plane(h, w)
    yy, xx = np.mgrid[0:h, 0:w]
    pts[..., 2] += 0.3 * np.exp(-((xx - w / 2) ** 2 + (yy - h / 2) ** 2) / 400.0)
    pts += rng.normal(0, 0.002, pts.shape).astype(np.float32)
    pts[10:14, 5:40] = np.nan  # holes, as a pointmap outside the person may have
    pts[3, 3, 1] = np.inf
    return pts


def test_device_dense_post_processing_equals_the_numpy_functions():
    """The pipeline runs the intrinsics fit, the depth-derived normals and the sign calibration as
    torch on the maps' device (processing/dense_torch.py): same numbers as the numpy functions."""
    from inference_server.processing import dense_torch

    rng = np.random.default_rng(3)
    pts = _noisy_bumpy_plane(rng)
    valid = rng.random(pts.shape[:2]) > 0.2
    pts_t, valid_t = torch.from_numpy(pts), torch.from_numpy(valid)
    for mask, mask_t in ((None, None), (valid, valid_t)):
        k, rms = intrinsics.fit_intrinsics(pts, mask)
        k_t, rms_t = dense_torch.fit_intrinsics(pts_t, mask_t)
        assert np.allclose(k_t, k, rtol=1e-6) and rms_t == pytest.approx(rms, rel=1e-6)
        ref = normals.normals_from_points(pts, mask)
        ref_t = dense_torch.normals_from_points(pts_t, mask_t).numpy()
        assert np.array_equal(np.isnan(ref), np.isnan(ref_t)) and np.nanmax(np.abs(ref - ref_t)) < 1e-6
    predicted = normals.normalize(ref * np.float32([1, -1, -1]) + rng.normal(0, 0.1, ref.shape).astype(np.float32))
    for flip in ((1, 1, 1), (1, -1, -1)):
        pred = predicted * np.float32(flip)
        cal = normals.calibrate_normal_signs(pred, ref, valid)
        cal_t = dense_torch.calibrate_normal_signs(torch.from_numpy(pred), torch.from_numpy(ref), valid_t)
        assert cal_t.signs == cal.signs and cal_t.pixels == cal.pixels
        assert cal_t.agreement_deg == pytest.approx(cal.agreement_deg, abs=1e-9)
        assert cal_t.before_deg == pytest.approx(cal.before_deg, abs=1e-9)
    few = dense_torch.calibrate_normal_signs(torch.from_numpy(pred), torch.from_numpy(ref),
                                             torch.zeros(valid.shape, dtype=torch.bool))
    assert few.pixels == 0 and few.signs == (1.0, 1.0, 1.0)


def test_device_intrinsics_fit_refuses_what_the_numpy_fit_refuses():
    from inference_server.processing import dense_torch

    flat = np.zeros((20, 20, 3), np.float32)
    flat[..., 2] = 2.0
    assert dense_torch.fit_intrinsics(torch.from_numpy(flat))[0] is None  # no spread of X/Z
    assert dense_torch.fit_intrinsics(torch.full((4, 4, 3), float("nan")))[0] is None
    behind = tilted_plane()
    behind[..., 2] *= -1  # nothing in front of the camera
    assert dense_torch.fit_intrinsics(torch.from_numpy(behind))[0] is None
    assert intrinsics.fit_intrinsics(behind)[0] is None


def test_masked_maps_come_back_as_float32_with_nan_outside():
    from inference_server.processing import dense_torch

    values = torch.arange(24, dtype=torch.float32).reshape(2, 4, 3)
    mask = torch.tensor([[True, False, True, False], [False, False, True, True]])
    out = dense_torch.masked_to_host(values, mask)
    assert out.dtype == np.float32 and out.shape == (2, 4, 3)
    assert np.isnan(out[0, 1]).all() and np.array_equal(out[0, 0], [0, 1, 2])
    assert np.isnan(dense_torch.masked_to_host(values[..., 0], mask)[1, 0])


def test_class_labels_are_the_argmax_as_uint8():
    from inference_server.processing.resize_pad import class_labels

    logits = torch.randn(1, 29, 40, 30, generator=torch.Generator().manual_seed(0))
    logits[0, :, 0, 0] = 1.0  # a tie: the first class wins, as torch's argmax says
    labels = class_labels(logits)
    assert labels.dtype == np.uint8 and labels.shape == (40, 30)
    assert np.array_equal(labels, logits[0].argmax(0).numpy()) and labels[0, 0] == 0


def test_device_erosion_equals_scipy_binary_erosion():
    from scipy import ndimage

    from inference_server.processing import dense_torch

    rng = np.random.default_rng(8)
    mask = ndimage.binary_dilation(rng.random((50, 40)) > 0.93, iterations=2)
    mask[:, :6] = True  # touching the image border: outside counts as background
    for iterations in (1, 2, 3):
        ours = dense_torch.erode(torch.from_numpy(mask), iterations).numpy()
        assert np.array_equal(ours, ndimage.binary_erosion(mask, iterations=iterations))
