# SPDX-License-Identifier: GPL-3.0-or-later
"""The canonical maps (docs/maps_format.md) and what reads or shows them: keypoint and part names,
Sapiens-lite files, previews, a minimal PNG writer."""
