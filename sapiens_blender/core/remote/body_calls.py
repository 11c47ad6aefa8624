# SPDX-License-Identifier: GPL-3.0-or-later
"""The body calls of the server: a photo analysed with its bodies fitted (one request), a fit for
a maps file's people, and the template a fit was made with (from the user cache when its version
is there)."""

from __future__ import annotations

import threading

import numpy as np

from ..build.options import wants_fit

from ..body.cache import load_cached_template, save_cached_template
from ..body.records import BodyFit, BodyTemplate, attach_body, scalar_str
from . import analysis


def analyze(client, photo, model: str, body: str = "none", *, progress=None, cancel_event=None,
            timeout: float | None = None, **analysis_options):
    """The one place that decides whether a photo's analysis fits the body: ``body`` is a body
    mode (core.build.options.BodyMode). With one, the server fits the maps it made in the same
    request (the maps never travel back); a server that sends no fit with them (one that predates
    the parameter) is asked to fit the maps in a second request. ``analysis_options``: tasks,
    max_side, flip_test. Returns ``(maps, notes)``: notes name the people that could not be fitted
    (also kept in ``maps.extras['fit_notes']``)."""
    fit = wants_fit(body)
    maps, arrays = analysis.analyze_photo_and_body(client, photo, model, progress=progress,
                                                   cancel_event=cancel_event, timeout=timeout,
                                                   body_fit=fit, **analysis_options)
    if not fit or not maps.person_ids:
        return maps, []
    if arrays is None:
        return fit_maps(client, maps, progress=progress, cancel_event=cancel_event, timeout=timeout)
    return maps, _attach(client, maps, arrays, timeout)


def _attach(client, maps, arrays, timeout) -> list[str]:
    """Attach a fit's arrays (and their template) to ``maps``; the notes of people not fitted
    (also kept in ``maps.extras['fit_notes']``)."""
    template = template_for(client, arrays, timeout)
    attach_body(maps, template, BodyFit.from_arrays(arrays, template=template))
    notes = [str(s) for s in np.asarray(arrays.get("skipped", [])).reshape(-1)]
    if notes:
        maps.extras["fit_notes"] = np.asarray(notes, np.str_)
    return notes


def fit_maps(client, maps, progress=None, cancel_event=None, timeout: float | None = None,
             people: list[int] | None = None):
    """``maps`` with the server's body fit attached (``core.remote.analysis.fit_body``; ``people``: only
    these mask ids); the template comes from the user cache when its version is there, else from
    the server (then cached). Returns ``(maps, notes)``: notes name the people the server could
    not fit."""
    arrays = analysis.fit_body(client, maps, people=people, progress=progress, cancel_event=cancel_event,
                               timeout=timeout)
    return maps, _attach(client, maps, arrays, timeout)


_TEMPLATE_LOCK = threading.Lock()  # photos analysed in parallel fetch and cache a template once


def template_for(client, fit_arrays, timeout: float | None = None) -> BodyTemplate:
    """The template a fit's arrays were made with: from the user cache when its version is there,
    else from the server (then cached)."""
    version = scalar_str(fit_arrays.get("body_version", ""))
    with _TEMPLATE_LOCK:
        return _template(client, version, timeout)


def _template(client, version: str, timeout) -> BodyTemplate:
    template = load_cached_template(version) if version else None
    if template is None:
        template = BodyTemplate.from_arrays(analysis.body_template(client, timeout=timeout))
        try:
            save_cached_template(template)
        except OSError:  # a read-only cache folder costs a download next time, nothing else
            pass
    return template
