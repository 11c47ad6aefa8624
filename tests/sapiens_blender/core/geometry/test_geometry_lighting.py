# SPDX-License-Identifier: GPL-3.0-or-later
"""The photo's light direction and backdrop colour, from a synthetic lit sphere."""

import numpy as np

from sapiens_blender.core.geometry.lighting import DEFAULT_DIRECTION, MIN_FRONT, estimate_lighting


def lit_sphere(light, size=96, backdrop=(30, 60, 120)):
    y, x = np.mgrid[0:size, 0:size]
    u, v = (x - size / 2) / (size * 0.4), (y - size / 2) / (size * 0.4)
    inside = u**2 + v**2 < 1
    normal = np.full((size, size, 3), np.nan, np.float32)
    normal[inside] = np.stack([u[inside], v[inside], -np.sqrt(1 - u[inside] ** 2 - v[inside] ** 2)], 1)
    light = np.asarray(light, float) / np.linalg.norm(light)
    shade = np.clip(0.15 + 0.7 * np.clip(normal @ light, 0, None), 0, 1)  # linear
    srgb = np.where(shade <= 0.0031308, shade * 12.92, 1.055 * shade ** (1 / 2.4) - 0.055)
    image = np.zeros((size, size, 3), np.uint8)
    image[:] = backdrop
    image[inside] = np.rint(np.nan_to_num(srgb[inside])[:, None] * 255).astype(np.uint8)
    return image, normal, inside.astype(np.uint8)


def test_the_key_light_direction_is_recovered():
    light = np.array([0.5, -0.4, -0.77])  # right, above, in front (camera frame)
    found = estimate_lighting(*lit_sphere(light))
    angle = np.degrees(np.arccos(found.direction @ (light / np.linalg.norm(light))))
    assert found.fitted and angle < 15, angle
    assert found.background[2] > found.background[1] > found.background[0]  # the blue backdrop, linear


def test_a_back_light_is_moved_to_the_front_and_no_person_gives_the_default():
    found = estimate_lighting(*lit_sphere([0.8, 0.0, 0.6]))  # from behind, on the right
    assert found.direction[2] <= -MIN_FRONT + 1e-6 and found.direction[0] > 0.5
    image, normal, _ = lit_sphere([0, 0, -1])
    empty = estimate_lighting(image, normal, np.zeros(image.shape[:2], np.uint8))
    assert not empty.fitted and np.allclose(empty.direction, DEFAULT_DIRECTION / np.linalg.norm(DEFAULT_DIRECTION))
