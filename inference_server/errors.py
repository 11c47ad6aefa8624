# SPDX-License-Identifier: GPL-3.0-or-later
"""The root of the server's own errors.

Every error the server raises on purpose derives from ``InferenceServerError`` (keeping a builtin
base where callers rely on one, e.g. ``MessageError`` is a ``ValueError``). Two exceptions stay
outside on purpose: ``processing/`` is a leaf that imports nothing of ours (its ``ImageError`` is a
``ValueError``), and the fit's own errors live in ``fit/``.
"""


class InferenceServerError(Exception):
    """Root of every error inference_server raises on purpose."""
