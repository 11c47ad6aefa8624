# SPDX-License-Identifier: GPL-3.0-or-later
"""The nearest rotation to each of a batch of 3x3 matrices (special Procrustes), lean.

anny orients its rest bones by this, so a fit that frees the shape runs it at every evaluation,
on 104 bones. Through roma it took 1.1 ms of an 8 ms evaluation (forward and backward, one
thread): three dozen small operations around one 4x4 eigen-decomposition. Here it is Horn's
closed form with the quaternion's quadratic map built once: the rotation R(q) of a quaternion q
is a quadratic form per entry, R_ij = q^T E_ij q, so tr(R^T M) = q^T N(M) q with
N(M) = sum_ij M_ij E_ij, and the nearest rotation is R(q) for the eigenvector q of N's largest
eigenvalue. The backward pass reuses the forward's eigen-decomposition: dq = (l1 I - N)^+ dN q,
the pseudo-inverse damped (1/t -> t / (t^2 + eps^2)) where the answer is ill-conditioned
(a degenerate matrix: anny's orientation blends are far from rotations, some almost singular).
"""

from __future__ import annotations

import torch

GRADIENT_EPS = 1e-5
# Squarings of the shifted matrix in the sync-free eigenvector: the other eigenvalues' share
# falls as (l_k / l_1) ** (2 ** SQUARINGS); 40 leave nothing of a gap of 1e-10 relative.
SQUARINGS = 40

_E: dict = {}  # device -> E [3,3,4,4], float64


def _quadratic_map(device) -> torch.Tensor:
    """E [3,3,4,4]: R(q)_ij = q^T E_ij q for a unit quaternion q = (w, x, y, z), from the
    homogeneous form of the rotation matrix (valid for any norm, scaled by |q|^2)."""
    if device not in _E:
        def rot(q):
            w, x, y, z = q
            return torch.stack([
                torch.stack([w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)]),
                torch.stack([2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)]),
                torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z])])
        eye = torch.eye(4, dtype=torch.float64)
        e = torch.zeros((3, 3, 4, 4), dtype=torch.float64)
        for a in range(4):
            e[..., a, a] = rot(eye[a])
            for b in range(a + 1, 4):  # polarisation: the off-diagonal half of (e_a + e_b)'s form
                e[..., a, b] = e[..., b, a] = (rot(eye[a] + eye[b]) - rot(eye[a]) - rot(eye[b])) / 2
        _E[device] = e.to(device)
    return _E[device]


class _TopEigenvector(torch.autograd.Function):
    """The unit eigenvector of each symmetric 4x4 N [...,4,4] for its largest eigenvalue."""

    @staticmethod
    def forward(ctx, n):
        values, vectors = torch.linalg.eigh(n)
        ctx.save_for_backward(values, vectors)
        return vectors[..., -1]

    @staticmethod
    def backward(ctx, grad_q):
        values, vectors = ctx.saved_tensors
        q = vectors[..., -1]
        gap = values[..., -1:] - values  # [...,4]; 0 for the top one itself
        inverse = gap / (gap * gap + GRADIENT_EPS ** 2)  # damped 1/gap, 0 at the top
        # (l1 I - N)^+ g in the eigenbasis, then dL/dN = ((l1 I - N)^+ g) q^T
        pg = vectors @ ((vectors.transpose(-1, -2) @ grad_q[..., None]) * inverse[..., None])
        return pg @ q[..., None, :]


class _TopEigenvectorSyncFree(torch.autograd.Function):
    """The same eigenvector without an eigen-decomposition: torch.linalg.eigh on a GPU reads its
    error flags back to the host, which a CUDA graph cannot hold (graph_solver.py). Forward:
    the shifted matrix B = N + |N| I (every eigenvalue >= 0, the top one largest) squared
    SQUARINGS times, normalised each time, is the projector onto the top eigenvector; its
    largest column is that vector. Backward: the same damped pseudo-inverse as _TopEigenvector,
    written without the eigenbasis: with A = l1 I - N (eigenvalues gap_k),
    sum_k gap_k / (gap_k^2 + eps^2) v_k v_k^T g = (A^2 + eps^2 I)^-1 A g. No torch.linalg
    solver or decomposition: every operation is elementwise or a small matmul."""

    @staticmethod
    def forward(ctx, n):
        eye = torch.eye(4, dtype=n.dtype, device=n.device)
        b = n + torch.linalg.matrix_norm(n)[..., None, None] * eye
        for _ in range(SQUARINGS):
            b = b @ b
            b = b / torch.linalg.matrix_norm(b).clamp_min(1e-300)[..., None, None]
        column = torch.linalg.vector_norm(b, dim=-2).argmax(-1)  # [...]
        q = b.gather(-1, column[..., None, None].expand(*b.shape[:-1], 1))[..., 0]
        q = q / torch.linalg.vector_norm(q, dim=-1, keepdim=True).clamp_min(1e-300)
        ctx.save_for_backward(n, q)
        return q

    @staticmethod
    def backward(ctx, grad_q):
        n, q = ctx.saved_tensors
        eye = torch.eye(4, dtype=n.dtype, device=n.device)
        top = (q[..., None, :] @ n @ q[..., :, None])[..., 0, 0]  # l1, the Rayleigh quotient
        a = top[..., None, None] * eye - n
        # q's own share is 0 (its gap is 0): q q^T lifts that eigenvalue from eps^2 to 1, which
        # keeps the solve well conditioned and changes nothing on q's complement.
        qq = q[..., :, None] * q[..., None, :]
        pg = _solve_spd4(a @ a + GRADIENT_EPS ** 2 * eye + qq, a @ grad_q[..., None])
        pg = pg - qq @ pg
        return pg @ q[..., None, :]


def _solve_spd4(m: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x with m x = b for symmetric positive definite 4x4 ``m`` [...,4,4], ``b`` [...,4,1]: a
    Cholesky factorisation written out entry by entry. torch.linalg's solvers check their
    error flags on the host (a CUDA graph cannot hold that) or call solver libraries."""
    n = 4
    low = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            acc = m[..., i, j]
            for k in range(j):
                acc = acc - low[i][k] * low[j][k]
            low[i][j] = torch.sqrt(acc.clamp_min(1e-300)) if i == j else acc / low[j][j]
    z = []
    for i in range(n):  # L z = b
        acc = b[..., i, 0]
        for k in range(i):
            acc = acc - low[i][k] * z[k]
        z.append(acc / low[i][i])
    x = [None] * n
    for i in reversed(range(n)):  # L^T x = z
        acc = z[i]
        for k in range(i + 1, n):
            acc = acc - low[k][i] * x[k]
        x[i] = acc / low[i][i]
    return torch.stack(x, -1)[..., None]


def special_procrustes(m: torch.Tensor, sync_free: bool = False) -> torch.Tensor:
    """The rotations nearest to ``m`` [...,3,3] (Frobenius), as matrices [...,3,3]; computed
    in float64 (a near-singular matrix's top eigenvalues are close), returned in m's dtype.
    Both maps are one matrix product each (E as [9,16]): einsum's dispatch cost more than
    the arithmetic. ``sync_free``: without torch.linalg.eigh (for a CUDA graph; slower on a CPU)."""
    e = _quadratic_map(m.device).reshape(9, 16)
    batch = m.shape[:-2]
    n = (m.reshape(-1, 9).double() @ e).reshape(-1, 4, 4)
    q = (_TopEigenvectorSyncFree if sync_free else _TopEigenvector).apply(n)
    r = (q[:, :, None] * q[:, None, :]).reshape(-1, 16) @ e.T
    return r.reshape(*batch, 3, 3).to(m.dtype)
