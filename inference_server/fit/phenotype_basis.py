# SPDX-License-Identifier: GPL-3.0-or-later
"""anny's phenotypes -> blendshape coefficients, in a dozen tensor operations instead of ~250.

anny interpolates each phenotype between its anchors (age: newborn .. old) one phenotype at a
time, then multiplies, for each of its 624 phenotype blendshapes, the interpolation weights of
the variations it combines, and projects them onto its compact basis. The numbers are cheap;
the cost is the operation count (about 190 of the ~930 forward operations of a skeleton
evaluation, and as many again backwards; on a GPU each is a kernel launch). Here every phenotype
is interpolated at once (one batched ``searchsorted`` over padded anchors) and the products are
one gather and one ``prod``. Same formula, same one-sided gradient on an anchor (the fit starts
on one: 0.5), so the same numbers up to float rounding; ``PhenotypeBasis.of`` checks that against
anny's own function when the body model loads and keeps anny's where they differ (another anny
version, say).
"""

from __future__ import annotations

import torch


class PhenotypeBasis:
    """anny's phenotype -> blendshape coefficient map for the phenotypes it exposes."""

    def __init__(self, model):
        from anny.models.model_data import PHENOTYPE_VARIATIONS
        from anny.utils.interpolation import linear_interpolation_coefficients

        labels = list(model.phenotype_labels)
        dt, dev = model.template_vertices.dtype, model.template_vertices.device
        columns, offset = {}, 0  # each variation's column, in anny's order
        for feature, variations in PHENOTYPE_VARIATIONS.items():
            columns[feature] = offset
            offset += len(variations)
        base = torch.zeros(offset, dtype=dt, device=dev)  # the variations no free phenotype moves
        free, anchors, firsts = [], [], []
        for feature, variations in PHENOTYPE_VARIATIONS.items():
            if feature == "race":  # anny's default: equal parts
                base[columns[feature]:columns[feature] + len(variations)] = 1.0 / len(variations)
            elif feature in labels:
                free.append(labels.index(feature))
                anchors.append(model.anchors[feature])
                firsts.append(columns[feature])
            else:  # held at anny's default, 0.5
                half = torch.full((1,), 0.5, dtype=dt, device=dev)
                w = linear_interpolation_coefficients(half, model.anchors[feature], model.extrapolate_phenotypes)
                base[columns[feature]:columns[feature] + len(variations)] = w[0]
        width = max(len(a) for a in anchors)
        padded = torch.full((len(anchors), width), float("inf"), dtype=dt, device=dev)
        for f, a in enumerate(anchors):
            padded[f, :len(a)] = a
        self._free = torch.tensor(free, dtype=torch.long, device=dev)
        self._anchors = padded  # [F,A]; +inf past a phenotype's last anchor
        self._low = torch.stack([a[0] for a in anchors])[:, None]
        self._high = torch.stack([a[-1] for a in anchors])[:, None]
        self._last = torch.tensor([len(a) - 1 for a in anchors], device=dev)[:, None]
        self._first = torch.tensor(firsts, device=dev)[:, None]
        self._base = base
        # Per blendshape, the columns of the variations it multiplies; padded with a column of ones.
        mask = model.stacked_phenotype_blend_shapes_mask > 0
        factors = int(mask.sum(1).max())
        table = torch.full((mask.shape[0], factors), offset, dtype=torch.long, device=dev)
        for k, row in enumerate(mask):
            cols = torch.nonzero(row).flatten()
            table[k, :len(cols)] = cols
        self._table = table
        self._projection = model.phenotype_blendshape_projection

    @classmethod
    def of(cls, model):
        """The fast map when it reproduces anny's on test phenotypes, else None (use anny's)."""
        if model.extrapolate_phenotypes or model.local_change_labels or model.facial_action_labels:
            return None
        try:
            basis = cls(model)
            probe = torch.rand((16, len(model.phenotype_labels)), generator=torch.Generator().manual_seed(0))
            probe[:3] = torch.tensor([0.0, 0.5, 1.0])[:, None]  # on anchors and at the ends
            probe = probe.to(basis._base)
            empty = probe.new_zeros((len(probe), 0))
            expected = model._get_phenotype_blendshape_coefficients(probe, empty, empty)
            got = basis(probe)
        except Exception:  # noqa: BLE001 - an anny whose internals moved: use its own function
            return None
        if got.shape != expected.shape or not torch.allclose(got, expected, rtol=1e-4, atol=1e-6):
            return None
        return basis

    def __call__(self, phenotypes: torch.Tensor) -> torch.Tensor:
        """[P,n] phenotypes in [0,1] (anny's labels' order) -> [P,C] blendshape coefficients."""
        values = phenotypes[:, self._free].T  # [F,P]
        # Clamped to the anchors' range by selection, as anny does, so that a value on a bound
        # keeps its gradient.
        values = torch.where(values < self._low, self._low, values)
        values = torch.where(values > self._high, self._high, values)
        upper = torch.searchsorted(self._anchors, values.contiguous(), side="left")
        upper = torch.minimum(torch.clamp_min(upper, 1), self._last)
        lo = self._anchors.gather(1, upper - 1)
        alpha = (values - lo) / (self._anchors.gather(1, upper) - lo)
        column = (self._first + upper - 1).T  # [P,F]: the lower anchor's column
        weights = self._base.expand(len(phenotypes), -1).scatter(
            1, torch.cat([column, column + 1], 1), torch.cat([1.0 - alpha.T, alpha.T], 1))
        weights = torch.cat([weights, weights.new_ones((len(phenotypes), 1))], 1)
        factors = weights[:, self._table]  # [P,K,T]
        # The product over T as T - 1 multiplications, not prod(): prod's backward on a GPU
        # reads back whether any factor is 0 (a host read, which a CUDA graph cannot hold).
        coeffs = factors[..., 0]
        for t in range(1, factors.shape[-1]):
            coeffs = coeffs * factors[..., t]  # [P,K]
        return coeffs @ self._projection if self._projection is not None else coeffs
