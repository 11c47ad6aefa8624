# SPDX-License-Identifier: GPL-3.0-or-later
"""Create the inference server's own Python environment (venv + pip), bpy-free.

Dependency installation is the first thing users of ML add-ons fight with, so this module
makes one well-defined environment: a venv in the extension's user folder, the torch build for
this machine (CUDA wheels where an NVIDIA driver is present on Linux/Windows, the default
PyPI build with MPS on Apple Silicon, the CPU build elsewhere), then the server's
dependencies. The server source itself ships inside the extension and is put on PYTHONPATH
when the server starts, so updating the extension never needs a reinstall.

It is built in `<target>.partial` and renamed to `<target>` only when everything succeeded;
on failure or cancel the partial folder is deleted, so nothing half-installed is ever used.
"""

from __future__ import annotations

import os
import platform as _platform
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..errors import SapiensError

REQUIREMENTS_DIR = Path(__file__).resolve().parents[2] / "data"


def read_requirements(extra: str) -> tuple[str, ...]:
    """The requirement lines of a pyproject extra: sapiens_blender/data/requirements-<extra>.txt
    is the one list, read by pyproject.toml (dynamic extras) and by this module."""
    text = (REQUIREMENTS_DIR / f"requirements-{extra}.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith("#"))


def _is_torch(requirement: str) -> bool:
    return requirement.split(">", 1)[0].split("=", 1)[0].split("<", 1)[0].strip() == "torch"


# What `python -m inference_server` imports: numpy (the core's one dependency) and the extras
# "server" + "sapiens" + "fit" (the body fit), torch apart (it comes from the index that fits
# the machine).
_SAPIENS = read_requirements("sapiens")
_FIT = read_requirements("fit")
SERVER_REQUIREMENTS = tuple(dict.fromkeys(("numpy>=1.24,<2", *read_requirements("server"),
                                           *(r for r in _SAPIENS + _FIT if not _is_torch(r)))))
TORCH_REQUIREMENT = next(r for r in _SAPIENS if _is_torch(r))
CUDA_INDEX = "https://download.pytorch.org/whl/cu128"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
COMPLETE_MARKER = "sapiens_env.json"


class EnvSetupError(SapiensError, RuntimeError):
    """The environment could not be created; the message says what to do, `log` where to look."""

    def __init__(self, message: str, log: Path | None = None):
        super().__init__(message)
        self.log = log


class EnvSetupCancelled(EnvSetupError):
    """The user cancelled; the partial environment was removed."""


@dataclass(frozen=True)
class TorchVariant:
    name: str  # "cuda", "mps" or "cpu"
    index_url: str | None  # extra index for torch only; None = the default index


def detect_torch_variant(
    system: str | None = None,
    machine: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> TorchVariant:
    """Pick the torch build for this machine (no import of torch, no network)."""
    system = (system or _platform.system()).lower()
    machine = (machine or _platform.machine()).lower()
    if system == "darwin":
        # PyPI's macOS wheels carry MPS on Apple Silicon and are CPU-only on Intel Macs.
        return TorchVariant("mps" if machine in ("arm64", "aarch64") else "cpu", None)
    if system in ("linux", "windows") and which("nvidia-smi"):
        return TorchVariant("cuda", CUDA_INDEX)
    return TorchVariant("cpu", CPU_INDEX)


def venv_python(env_dir: str | Path) -> Path:
    """The interpreter of a venv on this OS."""
    env_dir = Path(env_dir)
    if os.name == "nt":
        return env_dir / "Scripts" / "python.exe"
    return env_dir / "bin" / "python"


def default_env_dir(user_dir: str | Path) -> Path:
    return Path(user_dir) / "server-env"


def is_complete(env_dir: str | Path) -> bool:
    env_dir = Path(env_dir)
    return (env_dir / COMPLETE_MARKER).is_file() and venv_python(env_dir).exists()


@dataclass
class EnvPlan:
    """Everything one set-up run does; tests point `find_links`/`no_index` at a local folder."""

    target: Path
    base_python: str = sys.executable
    torch: TorchVariant | None = None
    torch_requirement: str | None = TORCH_REQUIREMENT
    requirements: Sequence[str] = SERVER_REQUIREMENTS
    find_links: Sequence[str] = ()
    no_index: bool = False
    extra_pip_args: Sequence[str] = field(default_factory=tuple)

    @property
    def partial(self) -> Path:
        return self.target.with_name(self.target.name + ".partial")

    def pip_commands(self, python: Path) -> list[tuple[str, list[str]]]:
        """(stage, argv) for each pip step, run with the new venv's interpreter."""
        common = [str(python), "-m", "pip", "install", "--disable-pip-version-check",
                  "--no-input", "--progress-bar", "off"]
        for link in self.find_links:
            common += ["--find-links", str(link)]
        if self.no_index:
            common.append("--no-index")
        common += list(self.extra_pip_args)
        steps = []
        if self.torch_requirement:
            torch_cmd = list(common)
            if self.torch and self.torch.index_url and not self.no_index:
                # Extra, not replacing, so torch's own dependencies still come from PyPI.
                torch_cmd += ["--extra-index-url", self.torch.index_url]
            steps.append(("installing torch", torch_cmd + [self.torch_requirement]))
        if self.requirements:
            steps.append(("installing server packages", common + list(self.requirements)))
        return steps


ProgressFn = Callable[[str, float | None, str], None]


def build_environment(
    plan: EnvPlan,
    log_path: str | Path,
    progress: ProgressFn | None = None,
    cancel_event: threading.Event | None = None,
) -> Path:
    """Create the environment described by `plan`; return its interpreter path.

    Raises EnvSetupCancelled / EnvSetupError; in both cases nothing is left but the log.
    """
    progress = progress or (lambda stage, fraction, message: None)
    cancel_event = cancel_event or threading.Event()
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    partial = plan.partial
    shutil.rmtree(partial, ignore_errors=True)  # leftovers of a crashed earlier run
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            progress("creating environment", 0.0, f"python -m venv {partial}")
            _run([plan.base_python, "-m", "venv", str(partial)], log, cancel_event)
            python = venv_python(partial)
            steps = plan.pip_commands(python)
            for i, (stage, argv) in enumerate(steps):
                progress(stage, (i + 1) / (len(steps) + 2), " ".join(argv[-3:]))
                _run(argv, log, cancel_event, lambda line, s=stage: progress(s, None, line))
            progress("checking", (len(steps) + 1) / (len(steps) + 2), "pip check")
            _run([str(python), "-m", "pip", "check"], log, cancel_event)
        _write_marker(partial, plan)
        if plan.target.exists():
            shutil.rmtree(plan.target)
        partial.rename(plan.target)
    except EnvSetupCancelled:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    except EnvSetupError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        exc.log = log_path
        raise
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise EnvSetupError(f"Could not create the server environment: {exc}", log_path) from exc
    progress("done", 1.0, f"environment ready: {plan.target}")
    return venv_python(plan.target)


def _write_marker(env_dir: Path, plan: EnvPlan) -> None:
    import json

    info = {
        "torch": plan.torch.name if plan.torch else None,
        "torch_requirement": plan.torch_requirement,
        "requirements": list(plan.requirements),
    }
    (env_dir / COMPLETE_MARKER).write_text(json.dumps(info, indent=1), encoding="utf-8")


def _run(argv, log, cancel_event, on_line: Callable[[str], None] | None = None) -> None:
    """Run one step, streaming its output into the log; kill it on cancel."""
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    env = dict(os.environ, PYTHONUNBUFFERED="1", PIP_NO_COLOR="1")
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, env=env, bufsize=1)
    except OSError as exc:
        raise EnvSetupError(f"Could not run {argv[0]}: {exc}") from exc
    watcher = threading.Thread(target=_kill_on_cancel, args=(proc, cancel_event), daemon=True)
    watcher.start()
    tail: list[str] = []
    for line in proc.stdout:
        log.write(line)
        line = line.strip()
        if line:
            tail = (tail + [line])[-15:]
            if on_line:
                on_line(line)
    proc.wait()
    log.flush()
    if cancel_event.is_set():
        raise EnvSetupCancelled("Server environment set-up was cancelled; nothing was installed.")
    if proc.returncode != 0:
        last = "\n".join(tail[-6:])
        raise EnvSetupError(
            f"'{Path(argv[0]).name} {' '.join(argv[1:3])}' failed (exit {proc.returncode}). "
            f"Check your internet connection and disk space, then retry; the full log has the "
            f"details. Last lines:\n{last}"
        )


def _kill_on_cancel(proc: subprocess.Popen, cancel_event: threading.Event) -> None:
    while proc.poll() is None:
        if cancel_event.wait(0.1):
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
            return


def probe_interpreter(python: str | Path, timeout: float = 60.0) -> dict:
    """Run `python` with a tiny probe: its version, torch and which accelerators it sees.

    Returns {"ok": bool, "message": str, ...}; never raises for a bad path."""
    import json

    probe = (
        "import json, sys\n"
        "info = {'python': sys.version.split()[0], 'torch': None, 'cuda': False, 'mps': False,"
        " 'gpu': None}\n"
        "try:\n"
        "    import torch\n"
        "    info['torch'] = torch.__version__\n"
        "    info['cuda'] = bool(torch.cuda.is_available())\n"
        "    info['gpu'] = torch.cuda.get_device_name(0) if info['cuda'] else None\n"
        "    mps = getattr(torch.backends, 'mps', None)\n"
        "    info['mps'] = bool(mps and mps.is_available())\n"
        "except Exception as exc:\n"
        "    info['torch_error'] = f'{type(exc).__name__}: {exc}'\n"
        "print(json.dumps(info))\n"
    )
    python = str(python or "").strip()
    if not python:
        return {"ok": False, "message": "No server environment is set: the server runs on Blender's "
                "own Python with the bundled packages (the offline MediaPipe model). For Sapiens "
                "and the body fit use 'Set Up Server Environment' or enter a Python with torch."}
    if not Path(python).is_file():
        return {"ok": False, "message": f"The Python interpreter '{python}' does not exist. "
                "Pick the python executable of the environment that has torch installed."}
    try:
        proc = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return {"ok": False, "message": f"'{python}' did not answer within {timeout:.0f} s."}
    except (OSError, ValueError, IndexError) as exc:
        return {"ok": False, "message": f"'{python}' is not a working Python interpreter "
                f"({type(exc).__name__}: {exc})."}
    if info.get("torch") is None:
        info.update(ok=False, message=f"Python {info['python']} found but torch is missing "
                    f"({info.get('torch_error', 'not installed')}); only the 'mediapipe' "
                    "CPU model can run. Use 'Set Up Server Environment' to install torch.")
        return info
    accel = "CUDA: " + (info["gpu"] or "yes") if info["cuda"] else ("MPS" if info["mps"] else "CPU only")
    info.update(ok=True, message=f"Python {info['python']}, torch {info['torch']}, {accel}")
    return info
