# SPDX-License-Identifier: GPL-3.0-or-later
"""A tilted plane seen through known intrinsics: the known answer of the geometry conversions
(processing tests and the Sapiens pipeline tests)."""

import numpy as np

K_TRUE = np.array([[510.0, 0.0, 41.3], [0.0, 530.0, 58.7], [0.0, 0.0, 1.0]])
PLANE_NORMAL = np.array([0.35, -0.25, -1.0]) / np.linalg.norm([0.35, -0.25, -1.0])  # faces the camera


def tilted_plane(h=96, w=72, k=K_TRUE, n=PLANE_NORMAL, distance=2.5):
    """Camera-frame points of the plane n.P = -distance seen through K, pixel centres at +0.5."""
    u = np.arange(w) + 0.5
    v = np.arange(h) + 0.5
    rays = np.stack(np.broadcast_arrays((u[None, :] - k[0, 2]) / k[0, 0], (v[:, None] - k[1, 2]) / k[1, 1],
                                        np.ones((h, w))), -1)
    t = -distance / (rays @ n)
    return (rays * t[..., None]).astype(np.float32)
