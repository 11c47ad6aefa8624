# SPDX-License-Identifier: GPL-3.0-or-later
"""The body calls of the server: a fit for a maps file's people, and the template it was made with
(from the user cache when its version is there)."""

from __future__ import annotations

import numpy as np

from ..body.cache import load_cached_template, save_cached_template
from ..body.records import BodyFit, BodyTemplate, attach_body, scalar_str
from . import analysis


def fit_maps(client, maps, progress=None, cancel_event=None, timeout: float | None = None,
             people: list[int] | None = None):
    """``maps`` with the server's body fit attached (``core.remote.analysis.fit_body``; ``people``: only
    these mask ids); the template comes from the user cache when its version is there, else from
    the server (then cached). Returns ``(maps, notes)``: notes name the people the server could
    not fit."""
    arrays = analysis.fit_body(client, maps, people=people, progress=progress, cancel_event=cancel_event,
                               timeout=timeout)
    notes = [str(s) for s in np.asarray(arrays.get("skipped", [])).reshape(-1)]
    template = template_for(client, arrays, timeout)
    fit = BodyFit.from_arrays(arrays, template=template)
    attach_body(maps, template, fit)
    return maps, notes


def template_for(client, fit_arrays, timeout: float | None = None) -> BodyTemplate:
    """The template a fit's arrays were made with: from the user cache when its version is there,
    else from the server (then cached)."""
    version = scalar_str(fit_arrays.get("body_version", ""))
    template = load_cached_template(version) if version else None
    if template is None:
        template = BodyTemplate.from_arrays(analysis.body_template(client, timeout=timeout))
        try:
            save_cached_template(template)
        except OSError:  # a read-only cache folder costs a download next time, nothing else
            pass
    return template
