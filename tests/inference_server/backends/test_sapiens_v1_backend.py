# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens v1 backend: exact checkpoint names, tiny TorchScript models loaded by the real loader
from a hub-cache layout, relative depth, normal self-calibration, the missing-size fallback."""

import numpy as np
import pytest
from tiny_models import as_maps, offline_hub, photo, tiny_hub  # noqa: F401

from inference_server.dataplane.base import AnalyzeOptions, BackendError

pytest.importorskip("torch")
from inference_server.backends import sapiens_v1  # noqa: E402

pytestmark = [pytest.mark.torch]


def test_exact_checkpoint_names():
    assert sapiens_v1.checkpoint("pose", "1b") == (
        "facebook/sapiens-pose-1b-torchscript", "sapiens_1b_goliath_best_goliath_AP_639_torchscript.pt2")
    assert sapiens_v1.checkpoint("depth", "2b") == (
        "facebook/sapiens-depth-2b-torchscript", "sapiens_2b_render_people_epoch_25_torchscript.pt2")
    assert sapiens_v1.checkpoint("seg", "0.6b")[1] == \
        "sapiens_0.6b_goliath_best_goliath_mIoU_7777_epoch_178_torchscript.pt2"
    assert sapiens_v1.checkpoint("normal", "0.3b")[1] == "sapiens_0.3b_normal_render_people_epoch_66_torchscript.pt2"
    for task in ("seg", "pose"):
        with pytest.raises(KeyError, match="no 2b"):
            sapiens_v1.checkpoint(task, "2b")


def test_2b_says_which_tasks_use_the_1b_checkpoints():
    b = sapiens_v1.Sapiens1Backend("2b")
    assert b.source == "sapiens-2b (pose, seg: 1b)"
    files = b.describe()["files"]
    assert any("sapiens_2b_render_people_epoch_25" in f for f in files)
    assert any("sapiens_1b_goliath_best_goliath_AP_639" in f for f in files)


@pytest.mark.slow
def test_v1_analysis_gives_relative_depth_maps(tiny_hub, offline_hub):
    offline_hub(tiny_hub)
    assert sapiens_v1.weights_available("0.3b") and not sapiens_v1.weights_available("0.6b")
    b = sapiens_v1.Sapiens1Backend("0.3b", device="cpu")
    out = b.analyze(photo(), AnalyzeOptions(flip_test=True))
    maps = as_maps(out)
    assert not maps.metric and maps.pointmap is None and len(maps.part_names) == 28
    fg = maps.mask > 0
    assert maps.person_ids == [1]
    z = maps.depth[fg]
    assert np.all(np.isfinite(z)) and 0.5 <= np.median(z) <= 15 and np.ptp(z) <= 0.5 + 1e-3
    assert np.allclose(np.linalg.norm(maps.normal[fg], axis=-1), 1.0, atol=1e-4)
    assert "normal self-calibration" in str(out["notes"][0]) and np.isfinite(out["normal_agreement_deg"][0])
    assert "normal self-check" in maps.source
    assert maps.keypoints.shape == (1, 308, 3)
    b.unload()


def test_missing_v1_size_offline_is_a_clear_error(tiny_hub, offline_hub):
    offline_hub(tiny_hub)
    with pytest.raises(BackendError) as err:
        sapiens_v1.Sapiens1Backend("0.6b", device="cpu").load()
    assert err.value.status == 503
    assert "sapiens_0.6b_goliath_best_goliath_mIoU_7777_epoch_178_torchscript.pt2" in str(err.value)


def test_v1_file_names_are_the_hub_mains():
    """The files on the repos' main branches: pose, seg and normal checked against the hub's file
    listings (pose 0.6b moved from AP_600 to AP_609 and 1b from AP_640 to AP_639 on main; older
    snapshots hold the old names); depth from the upstream READMEs (shared reference sapiens.md 1.2)."""
    from inference_server.backends.sapiens_v1 import checkpoint

    assert checkpoint("pose", "0.6b") == ("facebook/sapiens-pose-0.6b-torchscript",
                                          "sapiens_0.6b_goliath_best_goliath_AP_609_torchscript.pt2")
    assert checkpoint("pose", "1b")[1] == "sapiens_1b_goliath_best_goliath_AP_639_torchscript.pt2"
    assert checkpoint("seg", "0.6b")[1] == "sapiens_0.6b_goliath_best_goliath_mIoU_7777_epoch_178_torchscript.pt2"
    assert checkpoint("seg", "1b")[1] == "sapiens_1b_goliath_best_goliath_mIoU_7994_epoch_151_torchscript.pt2"
    assert checkpoint("normal", "0.6b")[1] == "sapiens_0.6b_normal_render_people_epoch_200_torchscript.pt2"
    assert checkpoint("normal", "1b")[1] == "sapiens_1b_normal_render_people_epoch_115_torchscript.pt2"
    assert checkpoint("depth", "0.6b")[1] == "sapiens_0.6b_render_people_epoch_70_torchscript.pt2"
    assert checkpoint("depth", "1b")[1] == "sapiens_1b_render_people_epoch_88_torchscript.pt2"
