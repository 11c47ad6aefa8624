# SPDX-License-Identifier: GPL-3.0-or-later
"""Which interpreter runs the local server: Blender's own Python with the bundled wheels when
no server environment is set up, else the configured one."""

import os
import sys
from pathlib import Path

import pytest

from sapiens_blender.core.errors import ServerStartError
from sapiens_blender.core.local_server.process import ServerProcess
from sapiens_blender.core.local_server.runtime import (bundled_site_packages, extension_site_packages,
                                                       needs_environment, resolve_runtime)


def test_no_environment_runs_on_this_python_with_the_bundled_packages(tmp_path):
    runtime = resolve_runtime("", tmp_path / "src", extra_pythonpath=f"/plugins{os.pathsep}")
    assert runtime.bundled and runtime.python == sys.executable
    assert runtime.pythonpath[:2] == (str(tmp_path / "src"), "/plugins")  # our server source wins
    import mediapipe  # noqa: F401 - only to compare where it lives

    assert str(Path(sys.modules["mediapipe"].__file__).parents[1]) in runtime.pythonpath
    assert runtime.interpreter_args == ("-s",)  # the user's ~/.local cannot shadow Blender's numpy
    assert "Blender's Python" in runtime.describe()


def test_missing_bundled_packages_say_what_to_do(tmp_path):
    with pytest.raises(ServerStartError, match=r"no_such_pkg_x missing.*Set Up Server Environment"):
        resolve_runtime("", tmp_path, markers=("fastapi", "no_such_pkg_x"))


def test_a_configured_environment_gets_only_the_source(tmp_path):
    runtime = resolve_runtime("/envs/torch/bin/python", tmp_path, extra_pythonpath="/plugins")
    assert not runtime.bundled and runtime.pythonpath == (str(tmp_path), "/plugins")
    assert runtime.python == "/envs/torch/bin/python" and runtime.interpreter_args == ()


def test_interpreter_args_come_before_the_module(tmp_path):
    command = ServerProcess(python=sys.executable, interpreter_args=["-s"])._command(sys.executable)
    assert command[:4] == [sys.executable, "-s", "-u", "-m"]


def test_torch_models_need_the_environment():
    assert needs_environment("sapiens2-0.4b") and needs_environment("sapiens-1b")
    assert not needs_environment("mediapipe") and not needs_environment("auto")


def test_the_extensions_site_packages_is_found_when_not_on_sys_path(tmp_path):
    """A script's read_factory_settings takes Blender's extension site-packages off sys.path."""
    addon = tmp_path / "extensions" / "user_default" / "sapiens_blender"
    site = extension_site_packages(addon)
    assert site.parent.parent.parent.parent == tmp_path / "extensions"
    markers = ("no_such_pkg_a", "no_such_pkg_b")
    assert bundled_site_packages(markers, addon) is None
    (site / "no_such_pkg_a").mkdir(parents=True)
    (site / "no_such_pkg_b.py").write_text("")
    assert bundled_site_packages(markers, addon) == [str(site)]
