# SPDX-License-Identifier: GPL-3.0-or-later
"""The fit's nearest-rotation (inference_server/fit/procrustes.py) against roma's, which anny uses."""

import pytest

torch = pytest.importorskip("torch")
roma = pytest.importorskip("roma")

from inference_server.fit.procrustes import special_procrustes  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.anny]


def _matrices():
    g = torch.Generator().manual_seed(0)
    m = torch.randn(500, 3, 3, generator=g, dtype=torch.float64)
    # near-rotations, reflections, and near-singular ones (anny's orientation blends reach
    # singular values of 0.01)
    rot = roma.random_rotmat(100, dtype=torch.float64)
    near = rot + 0.05 * torch.randn(100, 3, 3, generator=g, dtype=torch.float64)
    flat = rot * torch.tensor([1.0, 1.0, 0.01], dtype=torch.float64)
    # a reflection with distinct singular values (an exact one has no single nearest rotation)
    reflected = rot * torch.tensor([1.0, 0.5, -0.2], dtype=torch.float64)
    return torch.cat([m, near, flat, reflected])


def test_nearest_rotation_and_its_gradient_match_roma():
    m = _matrices()
    ours_in, theirs_in = m.clone().requires_grad_(True), m.clone().requires_grad_(True)
    ours, theirs = special_procrustes(ours_in), roma.special_procrustes(theirs_in)
    assert torch.allclose(ours, theirs, atol=1e-10)
    eye = torch.eye(3, dtype=torch.float64)
    assert torch.allclose(ours @ ours.transpose(-1, -2), eye.expand_as(ours), atol=1e-10)
    assert torch.allclose(torch.linalg.det(ours), torch.ones(len(m), dtype=torch.float64), atol=1e-10)
    weights = torch.randn(ours.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    assert torch.allclose(ours_in.grad, theirs_in.grad, atol=1e-5 * float(theirs_in.grad.abs().max()))


def test_gradient_is_the_derivative_and_float32_stays_float32():
    m = torch.randn(6, 3, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(special_procrustes, (m,))
    out = special_procrustes(m.detach().float()[None])
    assert out.dtype == torch.float32 and out.shape == (1, 6, 3, 3)
