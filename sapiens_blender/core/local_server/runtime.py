# SPDX-License-Identifier: GPL-3.0-or-later
"""Which interpreter runs the local server, and with which folders on its path.

Two runtimes:

* **bundled** (no server environment configured): Blender's own Python (`sys.executable`)
  with the extension's wheels on its path. Blender installs the wheels the platform zip
  bundles (cli/extension_wheels.py) into its extensions' `site-packages`; this process can
  already import them, so their folder is found from where `mediapipe` and `fastapi` are.
  Serves the offline `mediapipe` model (and `auto`, which picks it without torch).
* **environment**: the Python the user set up (a venv with torch), for Sapiens and the body fit.

stdlib only.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ServerStartError

# Importable only from the bundled wheels (or an environment that has the server extra).
BUNDLED_MARKERS = ("mediapipe", "fastapi", "uvicorn", "cv2")
# Products that need torch, hence the server environment; the panel names them.
TORCH_MODELS = ("sapiens2", "sapiens")


@dataclass(frozen=True)
class ServerRuntime:
    python: str
    pythonpath: tuple[str, ...]  # the server source first, then the bundled wheels if any
    bundled: bool
    # `-s`: ignore the user's ~/.local site-packages, which could shadow Blender's numpy.
    interpreter_args: tuple[str, ...] = ()

    def describe(self) -> str:
        return (f"Blender's Python ({self.python}) with the bundled packages" if self.bundled
                else f"the server environment {self.python}")  # fmt: skip


def _package_root(module: str) -> Path | None:
    """The folder holding `module`, found without importing it (mediapipe takes ~2 s)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).parent
    return Path(spec.origin).parent if spec.origin else None


def extension_site_packages(addon_dir: Path | None = None) -> Path:
    """Where Blender puts the wheels of installed extensions: `<repo>/../.local/lib/pythonX.Y/
    site-packages`, beside the extension repositories. On sys.path only while an extension with
    wheels is enabled (a script's `read_factory_settings` takes it off), so found from here too."""
    addon = addon_dir or Path(__file__).resolve().parents[2]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return addon.parents[1] / ".local" / "lib" / version / "site-packages"


def bundled_site_packages(markers: tuple[str, ...] = BUNDLED_MARKERS,
                          addon_dir: Path | None = None) -> list[str] | None:  # fmt: skip
    """The folders that hold the bundled wheels' packages, or None when one is missing (the
    source-only zip, or a platform without wheels): importable ones where they are, else the
    extensions' site-packages when it holds them all."""
    folders: list[str] = []
    for module in markers:
        root = _package_root(module)
        if root is None:
            break
        if str(root) not in folders:
            folders.append(str(root))
    else:
        return folders
    site = extension_site_packages(addon_dir)
    if all((site / m).is_dir() or (site / f"{m}.py").is_file() for m in markers):
        return [str(site)]
    return None


def resolve_runtime(python: str, source_root: str | os.PathLike, extra_pythonpath: str = "",
                    markers: tuple[str, ...] = BUNDLED_MARKERS) -> ServerRuntime:  # fmt: skip
    """The runtime for a configured `python` ('' = none configured: the bundled runtime)."""
    extra = [p for p in extra_pythonpath.split(os.pathsep) if p]
    if python:
        return ServerRuntime(python, (str(source_root), *extra), bundled=False)
    folders = bundled_site_packages(markers)
    if folders is None:
        missing = [m for m in markers if _package_root(m) is None]
        raise ServerStartError(
            "No server environment is set up and the packages the add-on bundles for the offline "
            f"model are not installed here ({', '.join(missing)} missing; the zip for your platform "
            "bundles them). Install the platform's zip, or open Edit > Preferences > Add-ons > "
            "Sapiens and click 'Set Up Server Environment'.")
    return ServerRuntime(sys.executable, (str(source_root), *extra, *folders), bundled=True,
                         interpreter_args=("-s",))  # fmt: skip


def needs_environment(model: str) -> bool:
    """True for models that need torch, which Blender's Python never has."""
    family = (model or "").split("-")[0]
    return family in TORCH_MODELS


def local_server(python: str = "", extra_pythonpath: str = "", env: dict[str, str] | None = None, **kwargs):
    """A ServerProcess on the runtime `resolve_runtime` picks (not started yet).

    With no `python` and no bundled packages it falls back to this interpreter with only the
    server source on its path (a source checkout with the server installed, as before)."""
    from .process import ServerProcess, default_source_root

    source_root = kwargs.pop("source_root", None) or default_source_root()
    try:
        runtime = resolve_runtime(python, source_root, extra_pythonpath)
    except ServerStartError:
        runtime = ServerRuntime(sys.executable, (str(source_root),), bundled=False)
    env = dict(env or {}, PYTHONPATH=os.pathsep.join(runtime.pythonpath))
    return ServerProcess(python=runtime.python, source_root=source_root, env=env,
                         interpreter_args=runtime.interpreter_args, **kwargs)  # fmt: skip
