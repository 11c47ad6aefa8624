# SPDX-License-Identifier: GPL-3.0-or-later
"""Random tensors of every fixed-size v2 datatype, for round-trip tests."""

import numpy as np

from sapiens_blender.core.remote import v2_codec

FIXED = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
         "FP16", "FP32", "FP64"]  # fmt: skip


def sample(datatype, shape=(2, 3), seed=1, specials=False):
    """Integers span the dtype's full range; floats get NaN, +inf, -inf first with ``specials``."""
    rng = np.random.default_rng(seed)
    dtype = v2_codec.DATATYPE_TO_DTYPE[datatype]
    if datatype == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    values = (rng.normal(size=shape) * 100).astype(dtype)
    if specials:
        values.flat[:3] = [np.nan, np.inf, -np.inf]  # JSON spells these as strings
    return values
