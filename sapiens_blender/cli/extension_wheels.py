# SPDX-License-Identifier: GPL-3.0-or-later
"""The wheels the extension bundles so the server runs on Blender's own Python.

The list is what `python -m inference_server` imports while it serves the offline `mediapipe`
model, found with an import trace (sys.modules of the real server after analysing the bundled
photo; docs/user_guide.md "What the zip holds"). numpy is not here: Blender 4.2-5.0 ships
numpy 1.26 itself. Left out because the run never imports them: jax, jaxlib, sentencepiece,
absl-py, flatbuffers, contourpy (mediapipe's declared dependencies), httptools (uvicorn falls
back to h11). OpenCV comes as the headless build (no GUI libraries, 20 MB smaller than the
contrib build mediapipe declares; both provide the same `cv2`).

Versions are pinned so a zip is reproducible; they are the versions the test suite runs with.
Wheels are fetched with pip at packaging time into a cache folder and reused from there.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ..core.errors import SapiensError

BUNDLED_REQUIREMENTS = (
    # the offline model
    "mediapipe==0.10.21",
    "opencv-python-headless==4.11.0.86",
    "protobuf==4.25.9",
    "attrs==26.1.0",
    "sounddevice==0.5.6",  # imported by mediapipe.tasks (audio), unconditionally
    "cffi==2.1.1",
    # mediapipe.python.solutions imports matplotlib.pyplot (drawing helpers)
    "matplotlib==3.11.2",
    "cycler==0.12.1",
    "fonttools==4.68.0",
    "kiwisolver==1.5.1",
    "pyparsing==3.3.3",
    "python-dateutil==4.0.0",
    "packaging==26.3",
    # images
    "pillow==13.0.0",
    # the HTTP server
    "fastapi==0.165.0",
    "starlette==1.10.0",
    "pydantic==2.14.3",
    "pydantic_core==2.50.4",
    "annotated-types==0.8.0",
    "annotated-doc==0.0.7",
    "typing_extensions==4.16.0",
    "typing-inspection==0.4.5",
    "anyio==4.16.0",
    "idna==3.20",
    "opentelemetry-api==1.45.2",
    "uvicorn==0.54.0",
    "click==8.5.1",
    "h11==0.16.0",
)

# Blender platform name -> the wheel platform tags pip may pick for it (newest first).
PLATFORM_TAGS = {
    "linux-x64": ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"),
    "windows-x64": ("win_amd64",),
    "macos-arm64": ("macosx_14_0_arm64", "macosx_13_0_arm64", "macosx_12_0_arm64", "macosx_11_0_arm64",
                    "macosx_10_13_universal2", "macosx_10_9_universal2"),
    "macos-x64": ("macosx_13_0_x86_64", "macosx_12_0_x86_64", "macosx_11_0_x86_64", "macosx_10_15_x86_64",
                  "macosx_10_13_x86_64", "macosx_10_9_x86_64", "macosx_10_13_universal2",
                  "macosx_10_9_universal2"),
}
PLATFORMS = tuple(PLATFORM_TAGS)
# Taken as their pure-Python wheel on every platform: the compiled one only adds speed-ups the
# run never needs (fonttools: 1.2 MB instead of 3-5 MB; matplotlib imports it, nothing calls it).
PURE_PYTHON = frozenset({"fonttools"})
PYTHON_VERSION = "3.11"  # Blender 4.2 to 5.0 all embed CPython 3.11


class WheelError(SapiensError, RuntimeError):
    """A wheel is missing from the cache (offline) or pip could not fetch it."""


def default_cache_dir() -> Path:
    """`.cache/wheels` in the source checkout (ignored by git), one folder per platform."""
    return Path(__file__).resolve().parents[2] / ".cache" / "wheels"


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _requirement(spec: str) -> tuple[str, str]:
    name, version = spec.split("==")
    return _normalise(name), version


def _find_wheel(folder: Path, spec: str) -> Path | None:
    name, version = _requirement(spec)
    for wheel in sorted(folder.glob("*.whl")):
        parts = wheel.name.split("-")
        if _normalise(parts[0]) == name and parts[1] == version:
            if name not in PURE_PYTHON or wheel.name.endswith("-none-any.whl"):
                return wheel
    return None


def missing_wheels(platform: str, cache_dir: Path | None = None) -> list[str]:
    folder = (cache_dir or default_cache_dir()) / platform
    return [spec for spec in BUNDLED_REQUIREMENTS if _find_wheel(folder, spec) is None]


def fetch_command(platform: str, folder: Path, spec: str) -> list[str]:
    pure = _requirement(spec)[0] in PURE_PYTHON
    tags = [arg for tag in (("any",) if pure else PLATFORM_TAGS[platform]) for arg in ("--platform", tag)]
    return [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
            "--only-binary=:all:", "--no-deps", "--implementation", "cp",
            "--python-version", PYTHON_VERSION, *tags, "-d", str(folder), spec]  # fmt: skip


def platform_wheels(platform: str, cache_dir: Path | None = None, download: bool = True,
                    log=print) -> list[Path]:  # fmt: skip
    """The wheel files for `platform`, fetched into the cache first when `download` is on."""
    if platform not in PLATFORM_TAGS:
        raise WheelError(f"unknown platform {platform!r}; choose from {', '.join(PLATFORMS)}")
    folder = (cache_dir or default_cache_dir()) / platform
    missing = missing_wheels(platform, cache_dir)
    if missing and not download:
        raise WheelError(
            f"{len(missing)} wheels for {platform} are not in {folder} ({', '.join(missing[:4])}"
            f"{', ...' if len(missing) > 4 else ''}) and downloading is off; fetch them with "
            f"`sapiens-blender package-extension --platform {platform} --out DIR` online "
            f"or `bash scripts/install.sh test`")
    folder.mkdir(parents=True, exist_ok=True)
    for spec in missing:
        log(f"fetching {spec} for {platform}")
        proc = subprocess.run(fetch_command(platform, folder, spec), capture_output=True, text=True)
        if proc.returncode != 0 or _find_wheel(folder, spec) is None:
            raise WheelError(f"pip could not fetch {spec} for {platform}:\n{proc.stderr.strip()[-1500:]}")
    return [_find_wheel(folder, spec) for spec in BUNDLED_REQUIREMENTS]


def _main() -> int:
    """`python -m sapiens_blender.cli.extension_wheels PLATFORM...`: fill the cache (install.sh)."""
    for platform in sys.argv[1:] or ["linux-x64"]:
        try:
            platform_wheels(platform)
        except WheelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
