# SPDX-License-Identifier: GPL-3.0-or-later
"""The maps and body tensors' contract as the server states it: contract.json, the same file as
inference_server/protocol/contract.json (the two packages never import each other; a test keeps
the copies identical). Names, datatypes, shapes and units live there once."""

from __future__ import annotations

import json
from pathlib import Path

_SPEC = json.loads(Path(__file__).with_name("contract.json").read_text(encoding="utf-8"))
MAPS: dict[str, dict] = _SPEC["maps"]  # the maps tensors (docs/maps_format.md)
FIT: dict[str, dict] = _SPEC["fit"]  # a fit's arrays (docs/body_format.md)
# Tensors that carry one value, sent as [1] and kept as a numpy scalar ([]).
SCALARS = frozenset(k for spec in (MAPS, FIT) for k, v in spec.items() if v.get("scalar"))
