# SPDX-License-Identifier: GPL-3.0-or-later
"""People on the Sapiens path: a person detector's boxes split the foreground (people who touch
stay apart) and feed the pose crops; connected components are the fallback, and the notes say
which. Tiny random-weight RT-DETR detectors in the default repo's real layout, nothing downloaded."""

import numpy as np
import pytest
from tiny_models import DETECTOR_REPO, build_tiny_detector, offline_hub, photo, tiny_hub  # noqa: F401

from inference_server.dataplane.base import AnalyzeOptions
from inference_server.backends.settings import SapiensSettings
from inference_server.processing import instances

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from inference_server.backends import person_detector, sapiens2  # noqa: E402

pytestmark = [pytest.mark.torch]


def two_touching_people(h=60, w=100):
    """Foreground of two bodies that overlap by 6 columns (one connected blob), and their boxes."""
    fg = np.zeros((h, w), bool)
    fg[5:55, 10:50] = True
    fg[10:58, 44:90] = True
    boxes = np.asarray([[10, 5, 49, 54], [44, 10, 89, 57]], np.float64)
    return fg, boxes


def test_boxes_split_people_that_connected_components_merge():
    fg, boxes = two_touching_people()
    assert instances.label_people(fg).max() == 1  # the old behaviour: one person
    people, kept = instances.split_by_boxes(fg, boxes)
    assert people.max() == 2 and len(kept) == 2
    assert (people[fg] > 0).all() and (people[~fg] == 0).all()
    # each body keeps its own side; the overlap goes to the box it is more central to
    assert people[30, 20] != people[30, 80]
    assert people[30, 20] == people[30, 40] and people[30, 80] == people[30, 55]
    # person 1 is the larger one, and the kept boxes follow the ids
    assert (people == 1).sum() >= (people == 2).sum()
    assert kept[0].tolist() == boxes[1].tolist()


def test_boxes_without_foreground_are_dropped_and_stray_pixels_join_the_nearest_person():
    fg, boxes = two_touching_people()
    fg[0:3, 0:3] = True  # outside every box
    empty_box = [70, 0, 99, 4]  # a detection the segmentation does not support
    people, kept = instances.split_by_boxes(fg, np.vstack([boxes, empty_box]))
    assert len(kept) == 2 and people[1, 1] > 0
    none, kept_none = instances.split_by_boxes(np.zeros_like(fg), boxes)
    assert none.max() == 0 and len(kept_none) == 0


def test_decoding_matches_transformers_post_processing(tmp_path, monkeypatch):
    """Our person decode == RTDetrImageProcessor.post_process_object_detection's person boxes."""
    from transformers.models.rt_detr.image_processing_pil_rt_detr import RTDetrImageProcessorPil

    model = build_tiny_detector(tmp_path / "det", person_score_logit=0.0)
    with torch.no_grad():  # spread the person scores around the threshold
        head = model.model.decoder.class_embed[-1]
        head.weight.normal_(0, 1.0)
    with torch.inference_mode():
        out = model(pixel_values=torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(3)))
    hw = (90, 120)
    monkeypatch.setattr(person_detector, "NMS_IOU", 2.0)  # compare before our duplicate suppression
    ours = person_detector.decode_person_boxes(out.logits[0].numpy(), out.pred_boxes[0].numpy(), hw, 0,
                                               sigmoid=True, threshold=0.3)
    ref = RTDetrImageProcessorPil().post_process_object_detection(out, threshold=0.3, target_sizes=[hw])[0]
    ref_boxes = ref["boxes"][ref["labels"] == 0].numpy().astype(np.float64)
    assert 0 < len(ours) == len(ref_boxes)
    ref_boxes[:, 2:] -= 1.0  # continuous edges -> inclusive pixel-index extents
    ref_boxes[:, 0::2] = ref_boxes[:, 0::2].clip(0, hw[1] - 1)
    ref_boxes[:, 1::2] = ref_boxes[:, 1::2].clip(0, hw[0] - 1)
    order = np.lexsort(ref_boxes.T[::-1])
    np.testing.assert_allclose(ours[np.lexsort(ours[:, :4].T[::-1]), :4], ref_boxes[order], atol=1e-3)
    np.testing.assert_allclose(np.sort(ours[:, 4]), np.sort(ref["scores"][ref["labels"] == 0].numpy()), atol=1e-5)


def test_duplicate_detections_of_one_person_are_suppressed():
    logits = np.full((3, 2), 5.0)
    boxes = np.asarray([[0.5, 0.5, 0.4, 0.8], [0.51, 0.5, 0.4, 0.8], [0.2, 0.5, 0.2, 0.8]])
    kept = person_detector.decode_person_boxes(logits, boxes, (100, 100), 0, sigmoid=True)
    assert len(kept) == 2


def _backend(weights_dir, detector=DETECTOR_REPO):
    settings = SapiensSettings(device="cpu", precision="fp32", weights_dir=weights_dir, detector=detector)
    return sapiens2.Sapiens2Backend("0.4b", settings=settings)


def test_sapiens2_uses_the_detector_from_the_weights_folder(tiny_hub, offline_hub, tmp_path):
    offline_hub(tiny_hub)
    build_tiny_detector(tmp_path / "rtdetr_r18vd", person_score_logit=8.0)
    b = _backend(tmp_path)
    b.load()
    assert b.detector is not None and b.describe()["people"] == f"person detector {DETECTOR_REPO}"
    boxes_seen = []
    detect = b.detector.detect_batch
    b.detector.detect_batch = lambda photos, hws: boxes_seen.append(detect(photos, hws)) or boxes_seen[-1]
    out = b.analyze(photo(120, 90), AnalyzeOptions(max_side=120, tasks=("seg", "pose")))
    notes = str(out["notes"][0])
    assert f"from the person detector {DETECTOR_REPO}" in notes, notes
    assert len(boxes_seen[0][0]) >= 1 and out["keypoints"].shape[0] == out["mask"].max() >= 1
    b.unload()


def test_a_detector_that_sees_nobody_falls_back_to_connected_components(tiny_hub, offline_hub, tmp_path):
    offline_hub(tiny_hub)
    build_tiny_detector(tmp_path / "rtdetr_r18vd", person_score_logit=-8.0)
    b = _backend(tmp_path)
    out = b.analyze(photo(120, 90), AnalyzeOptions(max_side=120, tasks=("seg",)))
    notes = str(out["notes"][0])
    assert "connected components" in notes and "found no person" in notes and out["mask"].max() == 1


@pytest.mark.parametrize("labels, message", [
    ({0: "cat", 1: "dog"}, "no 'person' class"),
    (None, "not a transformers object detector"),
])
def test_unusable_detectors_are_named_in_the_notes(tiny_hub, offline_hub, tmp_path, labels, message):
    import json

    offline_hub(tiny_hub)
    folder = tmp_path / "rtdetr_r18vd"
    build_tiny_detector(folder, labels=labels)
    if labels is None:  # a repo whose config names no detection class
        config = json.loads((folder / "config.json").read_text())
        config["architectures"] = ["Sapiens2ForSemanticSegmentation"]
        (folder / "config.json").write_text(json.dumps(config))
    b = _backend(tmp_path)
    out = b.analyze(photo(120, 90), AnalyzeOptions(max_side=120, tasks=("seg",)))
    notes = str(out["notes"][0])
    assert "connected components" in notes and message in notes, notes


def test_offline_without_the_detector_says_so_and_still_serves(tiny_hub, offline_hub):
    offline_hub(tiny_hub)
    b = _backend(None)
    out = b.analyze(photo(120, 90), AnalyzeOptions(max_side=120, tasks=("seg",)))
    notes = str(out["notes"][0])
    assert f"person detector {DETECTOR_REPO} unavailable" in notes and "not available offline" in notes
    assert "hf download" in notes  # the usual what-to-do of a missing download
    off = _backend(None, detector="none")
    assert "SAPIENS_DETECTOR=none" in str(off.analyze(photo(120, 90), AnalyzeOptions(tasks=("seg",)))["notes"][0])
