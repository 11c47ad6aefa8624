# SPDX-License-Identifier: GPL-3.0-or-later
"""Server environment set-up against a LOCAL wheel folder (pip --no-index): no network."""

import sys
import threading
import zipfile
from pathlib import Path

import pytest

from sapiens_blender.core.local_server import env_setup
from sapiens_blender.core.local_server.env_setup import (
    EnvPlan,
    EnvSetupCancelled,
    EnvSetupError,
    build_environment,
    detect_torch_variant,
    is_complete,
    probe_interpreter,
    venv_python,
)
from repo_paths import REPO


def make_wheel(folder: Path, name: str, version: str = "0.1", body: str = "VALUE = 1\n") -> Path:
    """A minimal pure-Python wheel, written by hand (the format is a zip with metadata)."""
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    files = {
        f"{name}/__init__.py": body,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for arcname, text in files.items():
            zf.writestr(arcname, text)
    return path


def test_torch_variant_by_platform():
    has_smi = lambda name: "/usr/bin/nvidia-smi"  # noqa: E731
    no_smi = lambda name: None  # noqa: E731
    assert detect_torch_variant("Linux", "x86_64", has_smi).name == "cuda"
    assert detect_torch_variant("Windows", "AMD64", has_smi).index_url == env_setup.CUDA_INDEX
    assert detect_torch_variant("Linux", "x86_64", no_smi).index_url == env_setup.CPU_INDEX
    assert detect_torch_variant("Darwin", "arm64", has_smi) == env_setup.TorchVariant("mps", None)
    assert detect_torch_variant("Darwin", "x86_64", no_smi).name == "cpu"


def test_pip_commands_use_the_torch_index_only_for_torch(tmp_path):
    plan = EnvPlan(tmp_path / "env", torch=detect_torch_variant("Linux", "x86_64", lambda n: "x"))
    (torch_stage, torch_cmd), (_, deps_cmd) = plan.pip_commands(Path("py"))
    assert torch_stage == "installing torch" and env_setup.CUDA_INDEX in torch_cmd
    assert env_setup.CUDA_INDEX not in deps_cmd and "fastapi>=0.110" in deps_cmd


@pytest.mark.slow
def test_builds_env_from_local_wheels_then_fails_cleanly_then_cancels(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "fake_torch", body="__version__ = '9.9'\n")
    make_wheel(wheels, "fake_server_dep")
    stages = []
    plan = EnvPlan(
        tmp_path / "server-env",
        base_python=sys.executable,
        torch_requirement="fake_torch",
        requirements=["fake_server_dep"],
        find_links=[str(wheels)],
        no_index=True,
    )
    python = build_environment(plan, tmp_path / "setup.log", lambda s, f, m: stages.append(s))
    assert python == venv_python(plan.target) and is_complete(plan.target)
    assert not plan.partial.exists()
    assert {"creating environment", "installing torch", "installing server packages", "done"} <= set(stages)
    import subprocess

    out = subprocess.run([str(python), "-c", "import fake_torch, fake_server_dep; print(fake_torch.__version__)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "9.9"
    assert "fake_server_dep" in (tmp_path / "setup.log").read_text()

    # A package that is not in the wheel folder: clear error, the good env is left untouched,
    # the partial one removed.
    bad = EnvPlan(tmp_path / "other-env", base_python=sys.executable, torch_requirement=None,
                  requirements=["no_such_package_xyz"], find_links=[str(wheels)], no_index=True)
    with pytest.raises(EnvSetupError) as info:
        build_environment(bad, tmp_path / "bad.log")
    assert "no_such_package_xyz" in str(info.value) and info.value.log == tmp_path / "bad.log"
    assert not bad.target.exists() and not bad.partial.exists()
    assert is_complete(plan.target)

    # Cancel while the venv is being created: the running step is killed, nothing remains.
    cancel = threading.Event()

    def cancel_on_first_progress(stage, fraction, message):
        cancel.set()

    with pytest.raises(EnvSetupCancelled):
        build_environment(bad, tmp_path / "cancel.log", cancel_on_first_progress, cancel)
    assert not bad.target.exists() and not bad.partial.exists()


def test_probe_reports_bad_paths_and_torch(tmp_path):
    missing = probe_interpreter(tmp_path / "nope" / "python")
    assert not missing["ok"] and "does not exist" in missing["message"]
    assert not probe_interpreter("")["ok"]
    not_python = tmp_path / "not_python"
    not_python.write_text("hello")
    not_python.chmod(0o755)
    assert "not a working Python" in probe_interpreter(not_python)["message"]
    info = probe_interpreter(sys.executable)  # the test venv has torch (CPU build)
    assert info["ok"] and info["torch"] and info["cuda"] is False
    assert "CPU only" in info["message"]


def test_server_requirements_are_pyprojects_extras():
    """One source: the environment the add-on builds installs exactly pyproject's server and
    sapiens extras (plus numpy, the core's dependency); torch comes from its own index."""
    import tomllib

    root = REPO
    project = tomllib.loads((root / "pyproject.toml").read_text())
    extras = project["tool"]["setuptools"]["dynamic"]["optional-dependencies"]
    listed = {}
    for extra in ("server", "sapiens", "fit"):
        (path,) = extras[extra]["file"]
        listed[extra] = env_setup.read_requirements(extra)
        assert (root / path).resolve() == env_setup.REQUIREMENTS_DIR / f"requirements-{extra}.txt"
    wanted = {*project["project"]["dependencies"], *listed["server"], *listed["sapiens"], *listed["fit"]}
    assert {*env_setup.SERVER_REQUIREMENTS, env_setup.TORCH_REQUIREMENT} == wanted
    for module in ("scipy", "httptools", "opencv-contrib-python"):  # the ones that had drifted
        assert any(r.startswith(module) for r in env_setup.SERVER_REQUIREMENTS), module
    assert "optional-dependencies" in project["project"]["dynamic"]
