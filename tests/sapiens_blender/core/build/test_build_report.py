# SPDX-License-Identifier: GPL-3.0-or-later
"""The build's typed report: the lines the CLI prints and the JSON it stores."""

import json

import numpy as np

from sapiens_blender.core.build.report import (BodyReport, BuildReport, PersonReport, SkinningReport,
                                               fit_summary)


def test_products_are_noted_once_as_built_or_kept():
    report = PersonReport()
    for product, built in (("mesh", True), ("mesh", False), ("armature", False), ("mesh", True)):
        report.note_product(product, built)
    assert report.built == ["mesh"] and report.kept == ["armature"]


def test_lines_for_a_relief_mesh_with_skinning_notes_and_warnings():
    report = PersonReport(kept=["mesh"], vertices=120, faces=200, parts=["torso", "head"], bones=17,
                          skinning=SkinningReport(method="parts", vertices=120, fallback_vertices=120),
                          notes=["2 of 17 bones are estimated"], warnings=["3 vertices have no bone weight"])
    assert report.lines(4, has_mesh=True) == [
        "  person 4: 120 vertices, 200 faces, 2 parts, 17 bones, skinning parts (kept: mesh)",
        "    note: 2 of 17 bones are estimated",
        "    warning: 3 vertices have no bone weight",
    ]


def test_lines_for_the_body_alone():
    body = BodyReport(mode="clothed", vertices=14000, faces=28000, bones=163, parts=["head"],
                      clothing={"max_thickness_m": 0.0312})
    report = PersonReport(body=body, warnings=["no depth"])
    assert report.lines(1, has_mesh=False) == [
        "  person 1: body (clothed), 14000 vertices, 163 bones, 1 part materials, clothing up to 3.1 cm",
        "    warning: no depth",
    ]


def test_the_face_line_lists_the_set_keys_strongest_first_or_says_neutral():
    body = BodyReport(mode="minimal", vertices=13718, faces=27000, bones=104, expressions=52,
                      expression_source="fitted to the photo's face keypoints",
                      expression_values={"mouthSmileLeft": 0.62, "jawOpen": 0.9, "browInnerUp": 0.1})
    lines = PersonReport(body=body).lines(1, has_mesh=False)
    assert lines[1] == "    face: jawOpen 0.90, mouthSmileLeft 0.62, browInnerUp 0.10"
    assert json.loads(json.dumps(body.to_dict()))["expression_values"]["jawOpen"] == 0.9
    body.expression_values = {}
    assert PersonReport(body=body).lines(1, has_mesh=False)[1] == "    face: neutral"
    body.expression_values = None  # no expressions (--no-expressions): no line
    assert len(PersonReport(body=body).lines(1, has_mesh=False)) == 1


def test_to_dict_is_json_ready_and_leaves_out_what_is_not_there():
    report = PersonReport(vertices=np.int64(10), surface={"islands_removed": np.int32(2), "reprojection_px": np.float32("nan")},
                          skinning=SkinningReport(method="auto", vertices=10, max_influences=4))
    out = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert out["vertices"] == 10 and out["surface"] == {"islands_removed": 2, "reprojection_px": None}
    assert out["skinning"] == {"method": "auto", "vertices": 10, "fallback_vertices": 0,
                               "unweighted_vertices": 0, "max_influences": 4}
    assert "body" not in out
    build = BuildReport(source="photo.jpg", metric=False, size=(640, 480), added=["world"], warning="relative")
    assert json.loads(json.dumps(build.to_dict()))["size"] == [640, 480]


def test_the_body_line_says_how_well_the_fit_matched_and_warns_when_poorly():
    from sapiens_blender.core.build.report import fit_warnings

    good = {"seconds": 1.03, "reprojection_px": 0.34, "reprojection_pct": 0.15, "depth": "metric",
            "surface_residual_m": 0.0021}
    report = PersonReport(body=BodyReport(mode="minimal", vertices=13718, faces=27420, bones=104, fit=good))
    assert report.lines(1, has_mesh=False) == [
        "  person 1: body (minimal), 13718 vertices, 104 bones, 0 part materials",
        "    fit: 0.3 px from the keypoints (0.1 % of the person's size), surface 2 mm from the observed "
        "one (median), depth metric, 1.0 s",
    ]
    assert fit_warnings(good) == [] and fit_warnings({}) == []
    poor = dict(good, reprojection_pct=4.2, surface_residual_m=0.05)
    warned = fit_warnings(poor)
    assert len(warned) == 2 and "4.2 %" in warned[0] and "5.0 cm" in warned[1]
    # The offline backend's depth is a guess from the outline: loose clothing alone puts the body
    # a few cm behind it, so only a body far from it is warned about, in its own words.
    guessed = dict(good, depth="guessed from the outline", surface_residual_m=0.036)
    assert "surface 36 mm from the guessed one (median), depth guessed from the outline" in fit_summary(guessed)
    assert fit_warnings(guessed) == []
    far = fit_warnings(dict(guessed, surface_residual_m=0.118))
    assert len(far) == 1 and "11.8 cm from the depth guessed from this person's outline" in far[0]
    # A report from an older server (no percentage, no depth) still reads.
    assert fit_summary({"reprojection_px": 6.67}) == "6.7 px from the keypoints"
    # Limb folds the fit had to guess (no depth at the joint) are said, and which it turned over.
    folds = {"guessed": ["right_elbow", "left_knee"], "flipped": ["left_knee"]}
    assert fit_summary({"reprojection_px": 1.0, "limb_folds": folds}) == (
        "1.0 px from the keypoints, no depth at the right elbow and left knee (its other fold fitted better)")
