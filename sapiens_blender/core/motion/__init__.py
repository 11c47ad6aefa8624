# SPDX-License-Identifier: GPL-3.0-or-later
"""From a clip to animation data, on numpy: frame sources, per-frame pose sources, multi-person
tracking, temporal smoothing, foot planting and the bone rotations of a baked action.

Runs in Blender's Python (numpy + stdlib; OpenCV only when decoding a video file). The method and
its measured accuracy are documented in docs/geometry.md ("Motion").
"""
