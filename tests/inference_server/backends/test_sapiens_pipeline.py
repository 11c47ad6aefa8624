# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared Sapiens pipeline with a synthetic "model" whose outputs are known exactly: two
people, a tilted-plane pointmap, normals with a flipped axis, and keypoints drawn into the photo
as Gaussian spots that the pose "model" reads back from its top-down crops."""

import numpy as np
import pytest
from planes import K_TRUE, PLANE_NORMAL, tilted_plane

from inference_server.dataplane.base import AnalyzeOptions
from inference_server.backends.sapiens_pipeline import run_pipeline as run_batch
from inference_server.processing.goliath import PART_NAMES_SAPIENS2

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.torch]


def run_pipeline(runner, image, options, **kwargs):
    (result,) = run_batch(runner, [image], [options], **kwargs)
    return result

H, W = 96, 160
# person 1 is larger; far enough apart that each top-down crop holds only its own person
PEOPLE = {1: (slice(6, 90), slice(4, 34)), 2: (slice(20, 80), slice(110, 141))}
# Keypoints (pixel-index coordinates) drawn as Gaussian spots: nose in red, left eye in green.
SPOTS = {1: {0: (18.3, 30.6), 1: (25.7, 55.2)}, 2: {0: (120.45, 35.15), 1: (131.8, 70.4)}}


def synthetic_photo(scale: int = 1):
    """The spots photo at ``scale`` times the maps grid (same continuous spot positions)."""
    ys, xs = np.mgrid[0:H * scale, 0:W * scale].astype(np.float64)
    img = np.zeros((H * scale, W * scale, 3))
    for person in SPOTS.values():
        for channel, (x, y) in person.items():
            cx, cy = (x + 0.5) * scale - 0.5, (y + 0.5) * scale - 0.5
            img[..., channel] += 250 * np.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * (8.0 * scale) ** 2))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


class SyntheticRunner:
    """Model stand-in with exact outputs; the pipeline around it is the real one."""

    source = "synthetic"
    part_names = PART_NAMES_SAPIENS2
    metric = True
    pose_input_hw = (64, 48)
    mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    flip = (1.0, -1.0, 1.0)  # the "model" predicts y upside down...
    normal_signs = (1.0, 1.0, 1.0)  # ...while its family's convention says its axes are canonical

    def segment_batch(self, photos, hws):
        out = []
        for hw in hws:
            parts = np.zeros(hw, np.uint8)
            for rows, cols in PEOPLE.values():
                parts[rows, cols] = 22
            out.append(parts)
        return out

    def depth_batch(self, photos, hws):
        return [tilted_plane(*hw) for hw in hws]

    def normals_batch(self, photos, hws):
        return [np.broadcast_to(PLANE_NORMAL * np.asarray(self.flip), (*hw, 3)).astype(np.float32) for hw in hws]

    def pose(self, crops):
        self.crops = getattr(self, "crops", []) + [crops]
        # heatmap = red/green channel sampled at the UDP heatmap grid (align_corners=True), 1/4 size
        small = torch.nn.functional.interpolate(crops, size=(16, 12), mode="bilinear", align_corners=True)
        hm = torch.zeros((crops.shape[0], 308, 16, 12))
        hm[:, :2] = small[:, :2] / 250.0
        return hm.numpy()


def test_pipeline_known_answers():
    runner = SyntheticRunner()
    # the synthetic "heatmaps" are the photo's colours, not a model's: no mirror-image averaging
    out = run_pipeline(runner, synthetic_photo(), AnalyzeOptions(max_side=1024, flip_test=False))
    mask = out["mask"]
    assert mask[50, 10] == 1 and mask[50, 120] == 2 and mask[2, 2] == 0
    assert np.allclose(out["intrinsics"], K_TRUE, rtol=1e-3, atol=0.05)
    fg = mask > 0
    plane = tilted_plane(H, W)
    assert np.allclose(out["depth"][fg], plane[fg][:, 2], atol=1e-5) and np.isnan(out["depth"][~fg]).all()
    # the flipped y axis is detected and corrected; the agreement is reported
    assert np.allclose(out["normal"][fg], PLANE_NORMAL, atol=1e-5)
    assert out["normal_agreement_deg"][0] < 1.0 and "flipped axes y" in str(out["source"][0])
    kp = out["keypoints"]
    assert kp.shape == (2, 308, 3) and np.all(kp[:, 2:, 2] == 0)
    for person, spots in SPOTS.items():
        for channel, (x, y) in spots.items():
            got = kp[person - 1, channel]
            # canonical keypoints put pixel centres at +0.5
            assert np.hypot(got[0] - (x + 0.5), got[1] - (y + 0.5)) < 0.1, (person, channel, got)
            assert got[2] > 0.5


def test_normals_without_depth_are_still_calibrated_against_depth():
    """Normals asked for alone: the depth model runs to calibrate them (its maps are not returned);
    the answer does not depend on what an earlier request saw."""
    runner = SyntheticRunner()
    out = run_pipeline(runner, synthetic_photo(), AnalyzeOptions(tasks=("seg", "normal")))
    fg = out["mask"] > 0
    assert np.allclose(out["normal"][fg], PLANE_NORMAL, atol=1e-5)
    assert np.isnan(out["depth"]).all() and "pointmap" not in out
    assert out["normal_agreement_deg"][0] < 1.0 and "flipped axes y" in str(out["source"][0])


def test_normals_that_cannot_be_calibrated_use_the_fixed_convention_and_say_so():
    runner = SyntheticRunner()
    runner.normal_signs = (1.0, -1.0, 1.0)  # a convention that happens to be right for this "model"
    out = run_pipeline(runner, synthetic_photo(), AnalyzeOptions(tasks=("seg", "normal")), depth_available=False)
    fg = out["mask"] > 0
    assert np.allclose(out["normal"][fg], PLANE_NORMAL, atol=1e-5)
    assert np.isnan(out["normal_agreement_deg"][0])
    assert "normals NOT calibrated" in str(out["notes"][0]) and "(x, -y, z)" in str(out["notes"][0])


def test_the_convention_is_applied_before_the_per_photo_check():
    """With the right convention nothing is flipped by the check; the total flip is still reported."""
    runner = SyntheticRunner()
    runner.normal_signs = (1.0, -1.0, 1.0)
    out = run_pipeline(runner, synthetic_photo(), AnalyzeOptions())
    fg = out["mask"] > 0
    assert np.allclose(out["normal"][fg], PLANE_NORMAL, atol=1e-5)
    assert "flipped axes none" in str(out["notes"][0]) and "flipped axes y" in str(out["source"][0])


def test_sapiens_families_share_one_documented_normal_convention():
    from inference_server.backends.sapiens2 import Sapiens2Runner
    from inference_server.backends.sapiens_v1 import Sapiens1Runner
    from inference_server.processing.normals import SAPIENS_NORMAL_SIGNS

    assert Sapiens2Runner.normal_signs is SAPIENS_NORMAL_SIGNS is Sapiens1Runner.normal_signs


def test_pose_crops_come_from_the_original_photo_not_the_maps_grid():
    """A photo 3x the maps grid: the pose crops hold its fine detail (a 1-px checkerboard in the blue
    channel that the grid's antialiased downscale averages away), and the keypoints still land on
    the maps grid."""
    runner = SyntheticRunner()
    image = synthetic_photo(scale=3)
    checker = (np.indices(image.shape[:2]).sum(0) % 2 * 200).astype(np.uint8)
    image[..., 2] = checker
    out = run_pipeline(runner, image, AnalyzeOptions(max_side=W, flip_test=False))
    assert out["image"].shape[:2] == (H, W)
    assert out["image"][..., 2].std() < 10  # the grid lost the checkerboard...
    crops = torch.cat(runner.crops)
    inside = crops[:, 2, 8:-8, 8:-8]
    assert float((inside[..., 1:] - inside[..., :-1]).abs().mean()) > 50  # ...the crops kept it
    kp = out["keypoints"]
    for person, spots in SPOTS.items():
        for channel, (x, y) in spots.items():
            got = kp[person - 1, channel]
            assert np.hypot(got[0] - (x + 0.5), got[1] - (y + 0.5)) < 0.25, (person, channel, got)


class CountingRunner(SyntheticRunner):
    """Records how many photos each dense forward got."""

    def __init__(self):
        self.batches = []

    def depth_batch(self, photos, hws):
        self.batches.append(("depth", len(photos)))
        return [torch.from_numpy(d) for d in super().depth_batch(photos, hws)]  # as the GPU runners: tensors

    def normals_batch(self, photos, hws):
        self.batches.append(("normal", len(photos)))
        return [torch.from_numpy(np.ascontiguousarray(n)) for n in super().normals_batch(photos, hws)]

    def segment_batch(self, photos, hws):
        out = super().segment_batch(photos, hws)
        out[1][:] = 0  # the second photo has nobody in it
        return out


@pytest.mark.parametrize("queue_forwards", [False, True], ids=["cpu-order", "accelerator-order"])
def test_forwards_queued_before_the_segmentation_post_processing_give_the_same_maps(queue_forwards):
    """On an accelerator the depth and normal forwards are queued before the people are found (the
    device computes them meanwhile); the maps are the same as in the CPU order, where a photo
    without people skips those forwards."""
    expected = run_pipeline(SyntheticRunner(), synthetic_photo(), AnalyzeOptions(flip_test=False))
    runner = CountingRunner()
    both = [synthetic_photo(), synthetic_photo()]
    first, empty = run_batch(runner, both, [AnalyzeOptions(flip_test=False)] * 2, queue_forwards=queue_forwards)
    for key in ("mask", "parts", "depth", "normal", "pointmap", "intrinsics", "keypoints"):
        assert np.array_equal(first[key], expected[key], equal_nan=True), key
    assert str(first["source"][0]) == str(expected["source"][0])
    assert not empty["mask"].any() and "no person" in str(empty["notes"][0])
    assert runner.batches == ([("depth", 2), ("normal", 2)] if queue_forwards else [("depth", 1), ("normal", 1)])


def test_fit_masks_erode_the_foreground_and_keep_small_people_whole():
    from types import SimpleNamespace

    from scipy import ndimage

    from inference_server.backends.sapiens_pipeline import _fit_masks

    fg = np.zeros((60, 50), bool)
    fg[5:55, 10:40] = True
    big = SimpleNamespace(fg=fg, photo=torch.zeros(1))
    _fit_masks(big)
    assert np.array_equal(big.inner_t.numpy(), ndimage.binary_erosion(fg, iterations=2))
    assert np.array_equal(big.fg_t.numpy(), fg)
    small = np.zeros((60, 50), bool)
    small[20:27, 20:27] = True  # 9 pixels left after erosion: too few to fit on, used whole
    tiny = SimpleNamespace(fg=small, photo=torch.zeros(1))
    _fit_masks(tiny)
    assert np.array_equal(tiny.inner_t.numpy(), small)
