# SPDX-License-Identifier: GPL-3.0-or-later
"""Backends produce the canonical maps (docs/maps_format.md) from one RGB photo."""
