# SPDX-License-Identifier: GPL-3.0-or-later
"""Where an observed point meets the body's surface, though an evaluation skins only a subsample
of the mesh (problem.PersonProblem.pick_correspondences).

Measured against the tangent planes of the subsample's vertices alone (~1.7 cm apart), a point
between them lies inside those planes on a convex body: at the true sitting body 1.2 mm on
average, 5 mm for the worst 5 %, which pulled every fitted body a little small and far. So each
point is matched to its nearest point of the whole mesh's surface: on the faces around its
nearest mesh vertex, which is looked for among the mesh vertices around the point's subsample
vertex (the whole mesh searched cost 45 ms a round)."""

from __future__ import annotations

import numpy as np
import torch


class SurfaceIndex:
    """Per body model: around each subsample vertex the ``k`` mesh vertices nearest to it at
    rest [S,k] (itself first), and each mesh vertex's faces [V,F]."""

    def __init__(self, faces: torch.Tensor, rest_vertices: torch.Tensor, sample: torch.Tensor, k: int = 12):
        self.faces = faces
        self.around = torch.cat([torch.cdist(rest_vertices[chunk], rest_vertices).topk(k, largest=False).indices
                                 for chunk in sample.split(512)])
        self.vertex_faces = faces_of_vertices(faces, len(rest_vertices))

    def match(self, points: torch.Tensor, verts: torch.Tensor, carrier: torch.Tensor, facing: torch.Tensor,
              allowed: torch.Tensor, vertex_class: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per point [N,3], its match on the posed surface ``verts`` [V,3] and that face's unit
        normal, each [N,3]: on the faces around the nearest vertex that faces the camera
        (``facing`` [V]) and is of a part the point allows (``allowed`` [N,C] by
        ``vertex_class`` [V]), among those around its subsample vertex ``carrier`` [N] (an index
        into the subsample; the first around it is itself, which the caller picked so)."""
        around = self.around[carrier]  # [N,k]
        d = (points[:, None] - verts[around]).norm(dim=-1)
        ok = facing[around] & allowed.gather(1, vertex_class[around])
        own = around.gather(1, torch.where(ok, d, d + 1e3).argmin(1, keepdim=True))[:, 0]
        return self.nearest_on_faces_of(points, verts, own)

    def nearest_on_faces_of(self, points: torch.Tensor, verts: torch.Tensor,
                            vertex: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per point, its nearest point on the faces around ``vertex`` [N] and that face's normal."""
        return nearest_on_faces(points, verts[self.faces[self.vertex_faces[vertex]]])


def faces_of_vertices(faces: torch.Tensor, n_vertices: int) -> torch.Tensor:
    """Per vertex, the faces around it [V,F] (a vertex with fewer repeats its first; one with
    none holds face 0)."""
    f = faces.cpu().numpy()
    vertex, face = f.reshape(-1), np.repeat(np.arange(len(f)), 3)
    order = np.argsort(vertex, kind="stable")
    vertex, face = vertex[order], face[order]
    count = np.bincount(vertex, minlength=n_vertices)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    first = np.where(count > 0, face[np.minimum(start, len(face) - 1)], 0)
    table = np.repeat(first[:, None], count.max(), 1)
    table[vertex, np.arange(len(vertex)) - start[vertex]] = face
    return torch.as_tensor(table, device=faces.device)


def nearest_on_faces(points: torch.Tensor, faces: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per point [N,3], its nearest point on its candidate triangles ``faces`` [N,F,3(corner),3]
    and that triangle's unit normal, each [N,3]. A point is projected onto each triangle's
    plane and its barycentric coordinates clamped into the triangle: exact inside a triangle,
    near it at an edge, which is all a point on or just off the surface needs."""
    a, b, c = faces.unbind(-2)
    e0, e1 = b - a, c - a
    normal = torch.linalg.cross(e0, e1)
    normal = normal / normal.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    rel = points[:, None] - a
    rel = rel - (rel * normal).sum(-1, keepdim=True) * normal  # onto the plane
    d00, d01, d11 = (e0 * e0).sum(-1), (e0 * e1).sum(-1), (e1 * e1).sum(-1)
    d20, d21 = (rel * e0).sum(-1), (rel * e1).sum(-1)
    den = (d00 * d11 - d01 * d01).clamp_min(1e-20)
    v, w = (d11 * d20 - d01 * d21) / den, (d00 * d21 - d01 * d20) / den
    bary = torch.stack([1 - v - w, v, w], -1).clamp_min(0)
    bary = bary / bary.sum(-1, keepdim=True).clamp_min(1e-12)
    on = (bary[..., None] * faces).sum(-2)  # [N,F,3]
    best = (points[:, None] - on).norm(dim=-1).argmin(1, keepdim=True)[..., None].expand(-1, 1, 3)
    return on.gather(1, best)[:, 0], normal.gather(1, best)[:, 0]
