# SPDX-License-Identifier: GPL-3.0-or-later
"""The base of the project's state enums: members are their text value."""

from __future__ import annotations

from enum import Enum


class TextEnum(str, Enum):
    """An enum whose members equal, hash, print and serialise as their value: dicts keyed by
    the plain strings find them, and a message shows ``ready``, not ``ServerState.READY``."""

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value
