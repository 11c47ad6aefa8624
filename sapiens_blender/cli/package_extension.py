# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender package-extension`: build and validate the installable extension zip.

Blender's own builder/validator (`blender_ext.py`, standard library only) ships inside the
`bpy` wheel, so no Blender binary is needed. The zip's root is the add-on package itself, so a
staging folder is assembled first:

    staging/
      blender_manifest.toml      (from the repository root)
      __init__.py, core/, ui/, blender/, ...   (the sapiens_blender package)
      server_src/inference_server/   (the server source the add-on launches; only this folder
                                      goes on the server's PYTHONPATH, see ui/state.py)
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

MANIFEST = "blender_manifest.toml"
SERVER_DIR = "server_src"  # must match ui/state.py server_source_root()
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*")


class PackagingError(RuntimeError):
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


def build_extension(out_dir: str | Path, root: Path | None = None) -> Path:
    """Build the zip into `out_dir` with Blender's builder, validate it, return its path."""
    root = Path(root) if root else repository_root()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    builder, tags = find_blender_tools()
    with tempfile.TemporaryDirectory(prefix="sapiens_ext_") as tmp:
        staging = stage_extension(root, Path(tmp) / "sapiens_blender")
        _run_tool([str(builder), "validate", f"--valid-tags={tags}", str(staging)])
        with open(staging / MANIFEST, "rb") as fh:
            manifest = tomllib.load(fh)
        zip_path = out_dir / f"{manifest['id']}-{manifest['version']}.zip"
        _run_tool(
            [
                str(builder),
                "build",
                f"--source-dir={staging}",
                f"--output-filepath={zip_path}",
                f"--valid-tags={tags}",
            ]
        )
    # Validate what was produced, not only its sources.
    _run_tool([str(builder), "validate", f"--valid-tags={tags}", str(zip_path)])
    return zip_path


def _main(args) -> int:
    try:
        zip_path = build_extension(args.out)
    except PackagingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(zip_path)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "package-extension",
        help="build the Blender extension zip with Blender's own builder and validate it",
    )
    parser.add_argument("--out", required=True, help="folder to write the .zip into")
    parser.set_defaults(func=_main)
