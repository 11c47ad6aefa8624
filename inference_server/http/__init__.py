# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTTP side: FastAPI routes, request guards (Host, token, size), connection limits."""
