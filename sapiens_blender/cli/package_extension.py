# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender package-extension`: build and validate the installable extension zips.

One zip per platform (Blender's `--split-platforms`): each bundles, as manifest `wheels`, what
the server and its offline model import (cli/extension_wheels.py), so the add-on can run the
server on Blender's own Python with nothing else installed. `--platform NAME` builds one;
`--no-wheels` builds the small source-only zip for people who run their own server environment.

Blender's own builder/validator (`blender_ext.py`, standard library only) ships inside the
`bpy` wheel, so no Blender binary is needed. The zip's root is the add-on package itself, so a
staging folder is assembled first:

    staging/
      blender_manifest.toml      (from the repository root)
      __init__.py, core/, ui/, blender/, ...   (the sapiens_blender package)
      server_src/inference_server/   (the server source the add-on launches; only this folder
                                      goes on the server's PYTHONPATH, see core/local_server/runtime.py)
      wheels/*.whl               (the bundled wheels; Blender installs them on install)
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from . import extension_wheels
from .extension_wheels import WheelError
from ..core.errors import SapiensError

MANIFEST = "blender_manifest.toml"
SERVER_DIR = "server_src"  # must match core/local_server/process.py default_source_root()
WHEELS_DIR = "wheels"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*")


class PackagingError(SapiensError, RuntimeError):
    """The extension could not be built or did not validate; the message says why."""


def repository_root() -> Path:
    """The source checkout holding `sapiens_blender/`, `inference_server/` and the manifest."""
    return Path(__file__).resolve().parents[2]


def find_blender_tools() -> tuple[Path, Path]:
    """Paths of `blender_ext.py` and `tags.py` inside the installed `bpy` wheel."""
    spec = importlib.util.find_spec("bpy")  # locates the wheel without importing Blender
    if spec is None or not spec.submodule_search_locations:
        raise PackagingError(
            "Blender's extension builder ships inside the 'bpy' wheel, which is not installed; "
            "install it with: pip install 'sapiens-blender[blender]'"
        )
    bpy_dir = Path(list(spec.submodule_search_locations)[0])
    builders = sorted(bpy_dir.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    tags = sorted(bpy_dir.glob("*/scripts/modules/_bpy_internal/extensions/tags.py"))
    if not builders or not tags:
        raise PackagingError(f"blender_ext.py or tags.py not found under {bpy_dir}")
    return builders[-1], tags[-1]


def stage_extension(root: Path, staging: Path) -> Path:
    """Copy the add-on package, the server source and the manifest into `staging`."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise PackagingError(f"{manifest} not found: package-extension needs a source checkout")
    with open(manifest, "rb") as fh:
        declared = tomllib.load(fh).get("version")
    from .. import __version__

    if declared != __version__:
        raise PackagingError(
            f"{MANIFEST} says version {declared!r} but sapiens_blender is {__version__!r}; "
            "bump both together"
        )
    shutil.copytree(root / "sapiens_blender", staging, ignore=_IGNORE)
    shutil.copytree(root / "inference_server", staging / SERVER_DIR / "inference_server", ignore=_IGNORE)
    shutil.copy2(manifest, staging / MANIFEST)
    return staging


def _run_tool(args: list[str]) -> str:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or "FATAL_ERROR" in output or "\nERROR" in f"\n{output}":
        raise PackagingError(f"{Path(args[0]).name} {args[1]} failed:\n{output}")
    return output


def _declare_wheels(staging: Path, platforms: list[str], wheels: list[Path]) -> None:
    """Copy the wheels into the staging folder and name them (and the platforms) in its
    manifest; top-level keys must come before the first [table]."""
    folder = staging / WHEELS_DIR
    folder.mkdir()
    names = []
    for wheel in wheels:
        if not (folder / wheel.name).exists():
            shutil.copy2(wheel, folder / wheel.name)
            names.append(f"./{WHEELS_DIR}/{wheel.name}")
    lines = (staging / MANIFEST).read_text(encoding="utf-8").splitlines()
    first_table = next(i for i, line in enumerate(lines) if line.startswith("["))
    declared = [
        "# Added by package-extension: the platforms built and the wheels they bundle.",
        "platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]",
        "wheels = [",
        *(f'  "{name}",' for name in names),
        "]",
        "",
    ]
    (staging / MANIFEST).write_text("\n".join(lines[:first_table] + declared + lines[first_table:]) + "\n",
                                    encoding="utf-8")


def build_extension(
    out_dir: str | Path,
    root: Path | None = None,
    platforms: list[str] | tuple[str, ...] | None = None,
    bundle_wheels: bool = True,
    download: bool = True,
    wheel_cache: Path | None = None,
    log=lambda message: None,
) -> list[Path]:
    """Build the zips into `out_dir` with Blender's builder, validate each, return their paths.

    With `bundle_wheels` (the default) one zip per platform in `platforms` (all four by
    default) holding that platform's wheels; `download=False` uses only wheels already in the
    cache and fails clearly when one is missing. Without wheels: one source-only zip."""
    root = Path(root) if root else repository_root()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    builder, tags = find_blender_tools()
    if not bundle_wheels:
        return [_build_one(root, out_dir, builder, tags, None, [])]
    zips = []
    for platform in platforms or extension_wheels.PLATFORMS:
        try:
            wheels = extension_wheels.platform_wheels(platform, wheel_cache, download, log)
        except WheelError as exc:
            raise PackagingError(str(exc)) from None
        zips.append(_build_one(root, out_dir, builder, tags, platform, wheels))
    return zips


def _build_one(root: Path, out_dir: Path, builder: Path, tags: Path, platform: str | None,
               wheels: list[Path]) -> Path:  # fmt: skip
    """One zip: for `platform` with its own wheels only (a macOS universal2 wheel must not land
    in both macOS zips beside the arch-specific one), or source-only when platform is None."""
    with tempfile.TemporaryDirectory(prefix="sapiens_ext_") as tmp:
        staging = stage_extension(root, Path(tmp) / "sapiens_blender")
        if platform:
            _declare_wheels(staging, [platform], wheels)
        _run_tool([str(builder), "validate", f"--valid-tags={tags}", str(staging)])
        with open(staging / MANIFEST, "rb") as fh:
            manifest = tomllib.load(fh)
        stem = f"{manifest['id']}-{manifest['version']}"
        split = ["--split-platforms"] if platform else []
        _run_tool([str(builder), "build", f"--source-dir={staging}", f"--output-filepath={out_dir / stem}.zip",
                   f"--valid-tags={tags}", *split])  # fmt: skip
    zip_path = out_dir / (f"{stem}-{platform.replace('-', '_')}.zip" if platform else f"{stem}.zip")
    # Validate what was produced, not only its sources.
    _run_tool([str(builder), "validate", f"--valid-tags={tags}", str(zip_path)])
    return zip_path


def _main(args) -> int:
    platforms = args.platform or None
    try:
        zips = build_extension(args.out, platforms=platforms, bundle_wheels=not args.no_wheels,
                               download=not args.offline, log=lambda m: print(m, file=sys.stderr))  # fmt: skip
    except PackagingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for zip_path in zips:
        print(zip_path)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "package-extension",
        help="build the Blender extension zips (one per platform, with their wheels) and validate them",
    )
    parser.add_argument("--out", required=True, help="folder to write the .zip files into")
    parser.add_argument("--platform", action="append", choices=extension_wheels.PLATFORMS,
                        help="build only this platform's zip (repeatable; default: all four)")
    parser.add_argument("--offline", action="store_true",
                        help="use only wheels already in .cache/wheels; fail if one is missing")
    parser.add_argument("--no-wheels", action="store_true",
                        help="one small source-only zip: the server then needs its own environment")
    parser.set_defaults(func=_main)
