# SPDX-License-Identifier: GPL-3.0-or-later
"""Model settings are read once (flags over SAPIENS_* variables) and passed to the backends."""

import ast

import pytest
from repo_paths import REPO

from inference_server.backends.settings import DEFAULT_DETECTOR, SapiensSettings

BACKENDS = REPO / "inference_server" / "backends"


def test_settings_from_the_environment_and_overrides(tmp_path):
    env = {"SAPIENS_DEVICE": "CPU", "SAPIENS_PRECISION": "bf16", "SAPIENS_COMPILE": "1",
           "SAPIENS_WEIGHTS_DIR": str(tmp_path), "SAPIENS_INPUT_SCALE": "0.5", "SAPIENS_DETECTOR": "none",
           "SAPIENS_AUTO_MODEL": "mediapipe", "SAPIENS_AUTO_SIZE": "1b"}
    s = SapiensSettings.from_env(env)
    assert (s.device, s.precision, s.compile, s.weights_dir, s.input_scale, s.detector, s.auto_model,
            s.auto_size) == ("cpu", "bf16", "on", tmp_path, 0.5, None, "mediapipe", "1b")
    assert SapiensSettings.from_env(env, precision="fp32", device=None).precision == "fp32"
    assert SapiensSettings.from_env({}).detector == DEFAULT_DETECTOR
    with pytest.raises(ValueError, match="SAPIENS_INPUT_SCALE"):
        SapiensSettings.from_env({"SAPIENS_INPUT_SCALE": "half"})


def _environment_reads(tree) -> list[str]:
    """SAPIENS_* names read through os.environ[...], os.environ.get(...) or os.getenv(...)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            target, key = node.value, node.slice
        elif isinstance(node, ast.Call) and node.args:
            target, key = node.func, node.args[0]
        else:
            continue
        text = ast.unparse(target)
        if ("environ" in text or "getenv" in text) and isinstance(key, ast.Constant) \
                and str(key.value).startswith("SAPIENS_"):
            found.append(key.value)
    return found


def test_only_the_settings_module_reads_sapiens_variables():
    """Backends get a settings object; a SAPIENS_* variable read deep inside one is a regression."""
    reads = {path.name: _environment_reads(ast.parse(path.read_text()))
             for path in BACKENDS.glob("*.py") if path.name != "settings.py"}
    assert not {name: r for name, r in reads.items() if r}
    sample = "import os\nos.environ.get('SAPIENS_DEVICE')\nos.getenv('SAPIENS_X')\nos.environ['SAPIENS_Y']"
    assert _environment_reads(ast.parse(sample)) == ["SAPIENS_DEVICE", "SAPIENS_X", "SAPIENS_Y"]


def test_server_flags_override_the_environment(tmp_path, monkeypatch):
    from inference_server.__main__ import _model_settings, parse_args

    monkeypatch.setenv("SAPIENS_DEVICE", "cuda")
    monkeypatch.setenv("SAPIENS_DETECTOR", "someone/detector")
    s = _model_settings(parse_args(["--device", "cpu", "--detector", "none", "--weights-dir", str(tmp_path)]))
    assert (s.device, s.detector, s.weights_dir) == ("cpu", None, tmp_path.resolve())
    s = _model_settings(parse_args([]))
    assert (s.device, s.detector) == ("cuda", "someone/detector")
    import os

    assert os.environ["SAPIENS_DEVICE"] == "cuda"  # read, never rewritten


def test_compile_and_heads_default_to_auto_and_resolve_by_device():
    """auto compiles the backbone and mixes the heads on CUDA only; on the CPU both stay off, as
    before these switches existed; explicit values win everywhere."""
    from inference_server.backends import devices

    s = SapiensSettings.from_env({})
    assert (s.compile, s.heads) == ("auto", "auto")
    assert SapiensSettings.from_env({"SAPIENS_COMPILE": "0", "SAPIENS_HEADS": "MIXED"}).compile == "off"
    assert SapiensSettings(compile=True).compile == "on" and SapiensSettings(compile=False).compile == "off"
    with pytest.raises(ValueError, match="SAPIENS_COMPILE"):
        SapiensSettings.from_env({"SAPIENS_COMPILE": "maybe"})
    with pytest.raises(ValueError, match="SAPIENS_HEADS"):
        SapiensSettings.from_env({"SAPIENS_HEADS": "bf16"})
    assert devices.resolve_heads("cuda", "bf16") == "mixed"
    assert devices.resolve_heads("cuda", "fp16") == "fp32" and devices.resolve_heads("cpu", "bf16") == "fp32"
    assert devices.resolve_heads("cpu", "bf16", "mixed") == "mixed"
    assert devices.resolve_compile("cpu", "auto") is False and devices.resolve_compile("cpu", "on") is True
    assert devices.resolve_compile("cuda", "off") is False
    assert devices.resolve_compile("cuda", "auto") is devices.triton_available()
    cpu = devices.choose_placement("cpu", "bf16")  # the defaults on this machine
    assert (cpu.compile, cpu.heads) == (False, "fp32") and "mixed" not in cpu.describe()
    assert devices.choose_placement("cpu", "bf16", "off", "mixed").describe() == "cpu bf16, mixed heads"


def test_server_flags_set_compile_and_heads(monkeypatch):
    from inference_server.__main__ import _model_settings, parse_args

    monkeypatch.setenv("SAPIENS_COMPILE", "1")
    s = _model_settings(parse_args(["--compile", "off", "--heads", "mixed"]))
    assert (s.compile, s.heads) == ("off", "mixed")
    assert _model_settings(parse_args([])).compile == "on"
