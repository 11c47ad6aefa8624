# SPDX-License-Identifier: GPL-3.0-or-later
"""Under CI a missing bpy/torch/anny fails its tests instead of skipping them."""

import sys

import pytest


@pytest.mark.parametrize("name", ["bpy", "torch", "anny"])
def test_a_missing_required_package_fails_under_ci(monkeypatch, name):
    monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required under CI"):
        pytest.importorskip(name)
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        pytest.importorskip(name)


def test_packages_nobody_requires_still_skip_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.skip.Exception):
        pytest.importorskip("a_package_no_install_provides")
