# SPDX-License-Identifier: GPL-3.0-or-later
"""The geometry-core calls behind the Blender builders (numpy only, no bpy: the builders in
blender/ call these and write the results into bpy): surface, skeleton, part weights."""

from __future__ import annotations

import numpy as np

from ..geometry import joints as geo_joints
from ..geometry import skeleton as geo_skeleton
from ..geometry.surface import build_surface_mesh
from ..geometry.types import SurfaceMesh
from ..maps.canonical import Maps


def surface(maps: Maps, pid: int, stride: int, closed: bool) -> SurfaceMesh:
    """The person's visible surface (one vertex per ``stride`` pixels), or the closed body."""
    result = build_surface_mesh(maps, pid, stride=stride)
    if closed:
        from ..geometry.closed import close_body

        result = close_body(result, maps)
    return result


def proxy_stride(stride: int, n_vertices: int, max_vertices: int) -> int:
    """A stride whose surface has about ``max_vertices`` vertices (at least twice as coarse)."""
    factor = int(np.ceil(np.sqrt(n_vertices / max_vertices)))
    return stride * max(2, factor)


def skeleton(maps: Maps, pid: int, surface_mesh: SurfaceMesh, joints_by_person: dict | None):
    """(Skeleton, joint report, joints {name: Joint}): from a joints file's joints when given for
    ``pid``, else lifted from the maps."""
    given = (joints_by_person or {}).get(pid)
    joints = given if given else geo_joints.lift_joints(maps, pid, surface_mesh)
    skel = geo_skeleton.build_skeleton(joints, person_id=pid)
    report = dict(getattr(joints, "report", {}) or {})
    report = {k: sorted(v) if isinstance(v, (set, frozenset, list, tuple)) else v for k, v in report.items()}
    if given:
        report["source"] = "joints file"
    else:  # a half-body photo: no estimated legs hanging below the mesh
        skel, dropped = geo_skeleton.drop_bones_outside(skel, maps.mask == pid, maps.intrinsics)
        if dropped:
            report["dropped_bones"] = dropped
    return skel, report, dict(joints)


def part_weights(surface_mesh: SurfaceMesh, skel, maps: Maps):
    """Part-based weights of every vertex (the geometry core's sparse VertexWeights)."""
    from ..geometry.weights import part_based_weights

    return part_based_weights(surface_mesh, skel, maps.part_names)
