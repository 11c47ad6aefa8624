# SPDX-License-Identifier: GPL-3.0-or-later
"""Registers the built-in model names from the backend modules that are installed.

Each backend module exposes ``register_all()``. A module that is simply not there is skipped;
any other import error (a bug, a broken dependency inside it) propagates, so it is seen.
Importing a backend module must stay cheap: torch is imported when a model loads, not here.
"""

from __future__ import annotations

import importlib
import inspect
import logging

log = logging.getLogger("inference_server")

BUILTIN_BACKENDS = (
    "inference_server.backends.sapiens2",
    "inference_server.backends.sapiens_v1",
    "inference_server.backends.mediapipe_cpu",
    "inference_server.backends.auto",  # last: it picks among the ones registered before it
    "inference_server.fit.serving",  # the body fit (torch + anny, loaded on first use)
)


def register_builtin(settings=None, fit_settings=None) -> list[str]:
    """Import each built-in backend module that exists and call its ``register_all()``; the
    Sapiens and auto backends get ``settings`` (settings.SapiensSettings), the body fit
    ``fit_settings`` (fit.settings.FitServerSettings); None: the environment."""
    found = []
    for module_name in BUILTIN_BACKENDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            log.info("backend module %s is not installed; skipping", module_name)
            continue
        parameters = inspect.signature(module.register_all).parameters
        if "fit_settings" in parameters:
            module.register_all(fit_settings)
        elif "settings" in parameters:
            module.register_all(settings)
        else:
            module.register_all()
        found.append(module_name)
    return found


def import_extra(module_names: list[str]) -> None:
    """``--backend-module``: import modules whose import (or ``register_all()``) registers backends."""
    for module_name in module_names:
        module = importlib.import_module(module_name)
        register_all = getattr(module, "register_all", None)
        if callable(register_all):
            register_all()
