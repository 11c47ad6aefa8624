# SPDX-License-Identifier: GPL-3.0-or-later
"""The fitted body as numpy (docs/body_format.md): records, template cache, pose, dressing,
surface and texture, rig names."""
