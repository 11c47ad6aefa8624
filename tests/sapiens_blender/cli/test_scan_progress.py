# SPDX-License-Identifier: GPL-3.0-or-later
"""`scan`'s progress lines: a stage without a fraction (the server loading `body_scan`) prints a
line too, instead of failing the progress callback."""

from sapiens_blender.cli.scan import progress_line


def test_progress_line_with_a_fraction():
    assert progress_line("fit", 0.7, "one shape for 16 views") == "[fit  70%] one shape for 16 views"


def test_progress_line_without_a_fraction():
    assert progress_line("load", None, "loading body_scan") == "[load    ] loading body_scan"
