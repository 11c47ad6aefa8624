# SPDX-License-Identifier: GPL-3.0-or-later
"""Files on disk: atomic writes, safe reads of user files, per-user private folders."""
